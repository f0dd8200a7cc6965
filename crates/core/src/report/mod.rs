//! Reports rendered from the run record, which is their only input (so
//! `autoperf report` re-renders any results directory without re-running):
//!
//! - `text`: the tables printed at the end of a run (levels, capacity
//!   verdict, the profile's demand table).
//! - `csv`: `levels.csv`, one row per level.
//! - `html`: `report.html`, self-contained, charts drawn by `svg`.
//! - `svg`: deterministic inline SVG charts, and HTML/SVG text escaping.
//! - `prometheus`: `/metrics` during a run (`--metrics-listen`).
//! - `push`: the same metrics pushed as the run goes (Prometheus remote
//!   write, OTLP).

pub mod csv;
pub mod html;
pub mod prometheus;
pub mod push;
pub(crate) mod svg;
pub mod text;
