//! Nothing to use: this package only holds the peer benchmarks in `benches/`
//! (`cargo bench -p peer-benches --bench filters`, then `python3 peer-benches/benches/report.py`).
