//! One figure of the report: a chart (SVG) under its caption, with the
//! legend of what its lines, bands and marks are.

use std::fmt::Write;

use crate::report::svg::esc;

/// What a legend entry looks like.
pub(crate) enum Key<'a> {
    Line(&'a str, usize, bool),
    Flag(&'a str),
    Band(&'a str),
    BadBand(&'a str),
    Mark(&'a str),
    /// A neutral dashed line (reference lines drawn in their series' colour).
    Dashed(&'a str),
}

pub(crate) fn figure(h: &mut String, caption: &str, keys: &[Key], svg: &str) {
    let _ = write!(
        h,
        "<figure>\n<figcaption>{}</figcaption>\n<ul class=\"legend\">",
        esc(caption)
    );
    for k in keys {
        let (class, name) = match k {
            Key::Line(n, c, dashed) => (
                format!("sw s{}{}", c % 6, if *dashed { " dashed" } else { "" }),
                n,
            ),
            Key::Flag(n) => ("sw dot".into(), n),
            Key::Band(n) => ("sw area".into(), n),
            Key::BadBand(n) => ("sw badarea".into(), n),
            Key::Mark(n) => ("sw vmark".into(), n),
            Key::Dashed(n) => ("sw neutral dashed".into(), n),
        };
        let _ = write!(h, "<li><span class=\"{class}\"></span>{}</li>", esc(name));
    }
    let _ = write!(h, "</ul>\n{svg}\n</figure>\n");
}
