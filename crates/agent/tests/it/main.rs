//! The agent's integration tests, one binary: its HTTP API against a real
//! server on loopback, the /proc parsers on captured files, and `ProcFs`
//! over a /proc tree the tests build.

mod http;
mod parsers;
mod scan;
