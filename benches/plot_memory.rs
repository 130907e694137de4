//! Draws memory per item against the measured false-positive rate from `memory_quick`'s CSV
//! (`--csv`) as one PNG: a line with points per filter (and per mode of ours) over the target
//! rates, a single marker per fixed-rate peer, and the information-theoretic lower bound
//! `log2(1/ε)` bits per item.
//!
//! ```sh
//! cargo run -p peer-benches --release --bin plot_memory -- OUT.png CSV [--font TTF]
//! ```
//!
//! Columns are found by name (`filter`, `config`, `target_rate`, `items`, `probes`,
//! `bits_per_item`, `false_positives`, `status`); others are ignored. A point whose filter had
//! no false positive at all has no place on a logarithmic axis: it is named in a note under the
//! plot instead. The font defaults to Debian's DejaVu Sans, as `plot_scaling`'s does.

use std::error::Error;
use std::ops::Range;

use peer_benches::{csv_columns, plot_font_arg, register_plot_font};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;

/// One row of the CSV.
struct Point {
    filter: String,
    config: String,
    /// `None` for a fixed-rate peer (`fixed` in the CSV).
    target: Option<f64>,
    items: u64,
    probes: u64,
    bits: f64,
    false_positives: u64,
    status: String,
}

impl Point {
    fn rate(&self) -> f64 {
        self.false_positives as f64 / self.probes as f64
    }
    /// x: the measured rate as `-log10`, so that stricter rates lie to the right and the lower
    /// bound is a straight line.
    fn x(&self) -> f64 {
        -self.rate().log10()
    }
}

/// The x axis: `-log10(rate)` on a linear scale, with ticks at chosen rates. (plotters'
/// `with_key_points` over an `f64` range has no label formatter, so a mesh could not label it.)
struct RateAxis {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl Ranged for RateAxis {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = (value - self.range.start) / (self.range.end - self.range.start);
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // The ticks are the bold mesh lines; no light lines between them.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

fn read_points(path: &str) -> Result<Vec<Point>, Box<dyn Error>> {
    let names = [
        "filter",
        "config",
        "target_rate",
        "items",
        "probes",
        "bits_per_item",
        "false_positives",
        "status",
    ];
    let mut points = Vec::new();
    for [filter, config, target, items, probes, bits, fp, status] in csv_columns(path, names)? {
        // A filter that failed to build has no figures: nothing to draw.
        if bits.is_empty() {
            continue;
        }
        points.push(Point {
            filter,
            config,
            target: match target.as_str() {
                "fixed" => None,
                t => Some(t.parse()?),
            },
            items: items.parse()?,
            probes: probes.parse()?,
            bits: bits.parse()?,
            false_positives: fp.parse()?,
            status,
        });
    }
    Ok(points)
}

/// A rate as a percentage with as many digits as it needs: 5 %, 0.3 %, 0.001 %.
fn percent(rate: f64) -> String {
    let p = rate * 100.0;
    let digits = (-p.log10().floor()).max(0.0) as usize;
    format!("{p:.digits$} %")
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let font = plot_font_arg(&mut args)?;
    if args.len() != 2 {
        return Err("usage: plot_memory OUT.png CSV [--font TTF]".into());
    }
    register_plot_font(&font)?;
    let mut points = read_points(&args[1])?;
    if points.is_empty() {
        return Err("no points in the CSV".into());
    }
    // Targets that pick the same settings measure the same filter (`memory_quick` shares or
    // repeats the measurement): one point each.
    let mut seen: Vec<(String, String, String)> = Vec::new();
    points.retain(|p| {
        let key = (p.filter.clone(), p.config.clone(), format!("{:.4}", p.bits));
        let fresh = !seen.contains(&key);
        seen.push(key);
        fresh
    });
    let (drawn, unseen): (Vec<Point>, Vec<Point>) =
        points.into_iter().partition(|p| p.false_positives > 0);
    let items = drawn.first().map_or(0, |p| p.items);
    let probes = drawn.first().map_or(0, |p| p.probes);

    // Filters in order of first appearance, ours (its modes) first and the fixed-rate peers
    // last, so that the legend reads in that order; each with one colour.
    let mut filters: Vec<&str> = Vec::new();
    for p in &drawn {
        if !filters.contains(&p.filter.as_str()) {
            filters.push(&p.filter);
        }
    }
    let fixed_rate = |f: &str| drawn.iter().all(|p| p.filter != f || p.target.is_none());
    filters.sort_by_key(|f| (!f.starts_with("atomic-cuckoo ("), fixed_rate(f)));
    let (x_lo, x_hi) = drawn.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.x()), hi.max(p.x()))
    });
    let (x_lo, x_hi) = (x_lo.floor().min(1.0), x_hi.ceil());
    let bound = |x: f64| x * std::f64::consts::LOG2_10;
    let y_hi = drawn.iter().map(|p| p.bits).fold(bound(x_hi), f64::max) * 1.08;
    // Ticks at the decades and their threes (10 %, 3 %, 1 %, 0.3 %, …).
    let mut ticks = Vec::new();
    let mut decade = x_lo;
    while decade <= x_hi + 1e-9 {
        ticks.push(decade);
        if decade + 0.5 < x_hi {
            ticks.push(decade + 1.0 - 3f64.log10());
        }
        decade += 1.0;
    }

    let root = BitMapBackend::new(&args[0], (1400, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, rest) = root.split_vertically(50);
    let (body, foot) = rest.split_vertically(800);
    title.titled(
        &format!(
            "Memory per item against false-positive rate: {} items, rate measured with {} absent keys",
            thousands(items),
            thousands(probes)
        ),
        ("sans-serif", 24),
    )?;
    let mut chart = ChartBuilder::on(&body)
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(
            RateAxis {
                range: x_lo - 0.1..x_hi + 0.1,
                ticks,
            },
            0.0..y_hi,
        )?;
    chart
        .configure_mesh()
        .x_desc("measured false-positive rate (stricter to the right)")
        .y_desc("bits per item (memory × 8 / items)")
        .x_label_formatter(&|x| percent(10f64.powf(-x)))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()?;

    chart
        .draw_series(DashedLineSeries::new(
            [
                (x_lo - 0.1, bound(x_lo - 0.1)),
                (x_hi + 0.1, bound(x_hi + 0.1)),
            ],
            8,
            6,
            BLACK.stroke_width(2),
        ))?
        .label("lower bound: log2(1/ε) bits per item")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));

    let label_font = ("sans-serif", 13).into_font().color(&BLACK.mix(0.75));
    // Fixed colours that all read on white (the palette's yellow did not): ours from the reds,
    // the peers from the rest.
    const OURS: [RGBColor; 3] = [
        RGBColor(214, 39, 40),
        RGBColor(148, 50, 160),
        RGBColor(244, 150, 140),
    ];
    const PEERS: [RGBColor; 7] = [
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(31, 119, 180),
        RGBColor(140, 86, 75),
        RGBColor(23, 170, 190),
        RGBColor(110, 110, 110),
        RGBColor(227, 119, 194),
    ];
    let ours_count = filters
        .iter()
        .filter(|f| f.starts_with("atomic-cuckoo ("))
        .count();
    for (n, filter) in filters.iter().enumerate() {
        let colour = if n < ours_count {
            OURS[n % OURS.len()]
        } else {
            PEERS[(n - ours_count) % PEERS.len()]
        }
        .to_rgba();
        let mut series: Vec<&Point> = drawn.iter().filter(|p| p.filter == *filter).collect();
        series.sort_by(|a, b| a.x().total_cmp(&b.x()));
        let xy: Vec<(f64, f64)> = series.iter().map(|p| (p.x(), p.bits)).collect();
        let fixed = fixed_rate(filter);
        // Ours drawn heavier: the figure is about it.
        let width = if filter.starts_with("atomic-cuckoo (") {
            3
        } else {
            2
        };
        let failed = series.iter().any(|p| p.status != "ok");
        let name = if failed {
            format!("{filter} (inserts failed, see CSV)")
        } else {
            filter.to_string()
        };
        if fixed {
            // A fixed-rate peer: one marker, no line.
            chart
                .draw_series(
                    xy.iter()
                        .map(|&(x, y)| TriangleMarker::new((x, y), 9, colour.filled())),
                )?
                .label(format!("{name} (fixed rate)"))
                .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 7, colour.filled()));
        } else {
            chart
                .draw_series(LineSeries::new(xy.clone(), colour.stroke_width(width)))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(width))
                });
            chart.draw_series(
                xy.iter()
                    .map(|&(x, y)| Circle::new((x, y), 4, colour.filled())),
            )?;
        }
        // The fingerprint width beside each cuckoo and fuse point (a Bloom filter's hash count
        // only crowded the plot).
        chart.draw_series(
            series
                .iter()
                .filter(|p| p.config.ends_with("-bit"))
                .map(|p| {
                    EmptyElement::at((p.x(), p.bits))
                        + Text::new(p.config.clone(), (7, 2), label_font.clone())
                }),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .draw()?;

    let mut notes = vec![
        "Memory as each filter reports or allocates it (see memory_quick.rs); labels: fingerprint bits."
            .to_string(),
    ];
    if !unseen.is_empty() {
        let names: Vec<String> = unseen
            .iter()
            .map(|p| {
                format!(
                    "{} {} ({:.1} bits/item, target {})",
                    p.filter,
                    p.config,
                    p.bits,
                    p.target.map_or("fixed".into(), percent)
                )
            })
            .collect();
        notes.push(format!(
            "Not drawn, no false positive in {} probes: {}",
            thousands(probes),
            names.join("; ")
        ));
    }
    for (i, note) in notes.iter().enumerate() {
        foot.draw(&Text::new(
            note.clone(),
            (20, 8 + 22 * i as i32),
            ("sans-serif", 15),
        ))?;
    }
    root.present()?;
    println!("wrote {}", args[0]);
    Ok(())
}

/// `1000000` as `1,000,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
