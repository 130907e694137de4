//! Draws throughput against threads from `scaling_quick`'s CSV (`--csv`) as one PNG: a panel per
//! size (rows) and workload (columns), a line per peer, both axes logarithmic.
//!
//! ```sh
//! cargo run -p peer-benches --release --bin plot_scaling -- OUT.png CSV... [--font TTF]
//! ```
//!
//! Several CSVs may be given (runs that measured different peers); where two hold the same
//! point, the first one given wins. Columns are found by name (`size`, `workload`, `peer`,
//! `threads`, `median_mops`); others are ignored. The font defaults to Debian's DejaVu Sans.

use std::collections::BTreeSet;
use std::error::Error;

use peer_benches::{csv_columns, plot_font_arg, register_plot_font};
use plotters::prelude::*;

const SIZES: [&str; 2] = ["1M", "50M"];
const WORKLOADS: [(&str, &str); 3] = [
    ("lookup", "lookups"),
    ("mix", "90/10 mix"),
    ("insert", "inserts (fill to 95 %)"),
];

/// One point of the CSV.
struct Point {
    size: String,
    workload: String,
    peer: String,
    threads: u32,
    mops: f64,
}

fn read_points(paths: &[String]) -> Result<Vec<Point>, Box<dyn Error>> {
    let mut points: Vec<Point> = Vec::new();
    for path in paths {
        let names = ["size", "workload", "peer", "threads", "median_mops"];
        for [size, workload, peer, threads, mops] in csv_columns(path, names)? {
            let point = Point {
                size,
                workload,
                peer,
                threads: threads.parse()?,
                mops: mops.parse()?,
            };
            let seen = points.iter().any(|p| {
                (&p.size, &p.workload, &p.peer, p.threads)
                    == (&point.size, &point.workload, &point.peer, point.threads)
            });
            if !seen {
                points.push(point);
            }
        }
    }
    Ok(points)
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let font = plot_font_arg(&mut args)?;
    if args.len() < 2 {
        return Err("usage: plot_scaling OUT.png CSV... [--font TTF]".into());
    }
    register_plot_font(&font)?;
    let points = read_points(&args[1..])?;
    if points.is_empty() {
        return Err("no points in the CSVs".into());
    }
    // Peers in order of first appearance, each with one colour in every panel.
    let mut peers: Vec<&str> = Vec::new();
    for p in &points {
        if !peers.contains(&p.peer.as_str()) {
            peers.push(&p.peer);
        }
    }
    let threads: BTreeSet<u32> = points.iter().map(|p| p.threads).collect();
    let most = f64::from(*threads.last().expect("points"));
    let (low, high) = points.iter().fold((f64::MAX, 0f64), |(lo, hi), p| {
        (lo.min(p.mops), hi.max(p.mops))
    });

    let root = BitMapBackend::new(&args[0], (1500, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, body) = root.split_vertically(40);
    title.titled(
        "atomic-cuckoo and peers: throughput against threads (16-core Xeon VM)",
        ("sans-serif", 24),
    )?;
    let panels = body.split_evenly((SIZES.len(), WORKLOADS.len()));
    for (i, panel) in panels.iter().enumerate() {
        let (size, (workload, label)) =
            (SIZES[i / WORKLOADS.len()], WORKLOADS[i % WORKLOADS.len()]);
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{label}, {size} items"), ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            // x is log2 of the thread count, so that each doubling gets a labelled tick.
            .build_cartesian_2d(
                -0.1..most.log2() + 0.1,
                (low * 0.8..high * 1.25).log_scale(),
            )?;
        chart
            .configure_mesh()
            .x_desc("threads")
            .y_desc("M ops/s")
            .x_labels(most.log2() as usize + 1)
            .x_label_formatter(&|x| format!("{:.0}", x.exp2()))
            .y_label_formatter(&|y| format!("{y}"))
            .draw()?;
        for (n, peer) in peers.iter().enumerate() {
            let mut line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.size == size && p.workload == workload && p.peer == *peer)
                .map(|p| (f64::from(p.threads).log2(), p.mops))
                .collect();
            if line.is_empty() {
                continue;
            }
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            let colour = Palette99::pick(n).to_rgba();
            chart
                .draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))?
                .label(*peer)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            chart.draw_series(
                line.iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, colour.filled())),
            )?;
        }
        // A legend on each panel of the top row: each names the peers its workload has.
        if i < WORKLOADS.len() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .draw()?;
        }
    }
    root.present()?;
    println!("wrote {}", args[0]);
    Ok(())
}
