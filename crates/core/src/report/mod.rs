//! Reports rendered from the run record: for now the text summary tables.

pub mod text;
