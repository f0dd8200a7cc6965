//! Reports rendered from the run record: for now the text summary tables.

pub mod csv;
pub mod html;
pub mod prometheus;
pub mod svg;
pub mod text;
