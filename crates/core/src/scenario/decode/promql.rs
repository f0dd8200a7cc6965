//! A PromQL threshold, `thresholds: [{promql: {query, below | above, url}}]`:
//! an SLO on anything the system exports to Prometheus. Its URL defaults to
//! the one Prometheus `servers:` reads (whose credentials it shares).

use super::super::model::{Comparison, Metric, PromqlQuery, ServerSpec, Threshold};
use super::super::yaml::Node;
use super::ctx::Ctx;
use super::url::parse_base_url;

const KEYS: &[&str] = &["query", "below", "above", "url"];

pub(super) fn decode_promql_threshold(
    ctx: &mut Ctx,
    item: &Node,
    servers: &[ServerSpec],
) -> Option<Threshold> {
    let outer = ctx.map(item, "a threshold", &["promql"])?;
    let node = outer.required(ctx, "promql")?;
    let fields = ctx.map(node, "`promql`", KEYS)?;
    let query = fields.required(ctx, "query").and_then(|n| {
        let q = ctx.setting(n, "a PromQL query")?;
        if q.trim().is_empty() {
            ctx.error(n.pos(), "expected a PromQL query, found an empty one");
            return None;
        }
        Some(q)
    });
    let bound = match (fields.get("below"), fields.get("above")) {
        (Some(n), None) => number(ctx, n).map(|b| (Comparison::Less, b)),
        (None, Some(n)) => number(ctx, n).map(|b| (Comparison::Greater, b)),
        (Some(_), Some(n)) => {
            ctx.error(
                n.pos(),
                "expected one of `below` and `above` in `promql`, found both",
            );
            None
        }
        (None, None) => {
            ctx.error_hint(
                fields.pos,
                "missing `below` or `above` in `promql`",
                Some("the bound its query must stay under or over: `below: 0.8`".into()),
            );
            None
        }
    };
    let read_by_servers: Vec<&ServerSpec> =
        servers.iter().filter(|s| s.prometheus.is_some()).collect();
    let url = match fields.get("url") {
        Some(n) => {
            ctx.setting(n, "Prometheus's URL")
                .and_then(|text| match parse_base_url(&text) {
                    Ok(url) => Some((text, url)),
                    Err(e) => {
                        ctx.error(n.pos(), e.replace("a base URL", "Prometheus's URL"));
                        None
                    }
                })
        }
        None => {
            let mut urls: Vec<&str> = read_by_servers.iter().map(|s| s.agent.as_str()).collect();
            urls.dedup();
            match (urls.as_slice(), read_by_servers.first()) {
                ([_], Some(s)) => s
                    .prometheus
                    .as_ref()
                    .map(|p| (s.agent.clone(), p.url.clone())),
                _ => {
                    ctx.error_hint(
                        fields.pos,
                        "missing `url` in `promql`",
                        Some(if urls.is_empty() {
                            "the Prometheus to ask: `url: http://127.0.0.1:9090`".into()
                        } else {
                            format!("`servers:` reads several: {}", urls.join(", "))
                        }),
                    );
                    None
                }
            }
        }
    };
    let (query, (op, bound), (url_text, url)) = (query?, bound?, url?);
    let authorization = read_by_servers
        .iter()
        .find(|s| s.agent == url_text)
        .and_then(|s| s.prometheus.as_ref()?.authorization.clone());
    let word = if op == Comparison::Less { "<" } else { ">" };
    Some(Threshold {
        class: None,
        group: None,
        source: format!("promql `{query}` {word} {bound}"),
        request: None,
        tier: None,
        metric: Metric::Promql,
        op,
        bound,
        promql: Some(PromqlQuery {
            query,
            url_text,
            url,
            authorization,
        }),
    })
}

fn number(ctx: &mut Ctx, n: &Node) -> Option<f64> {
    match n.as_str().and_then(|s| s.trim().parse::<f64>().ok()) {
        Some(x) if x.is_finite() => Some(x),
        _ => {
            ctx.error(
                n.pos(),
                format!("expected a number, found {}", n.describe()),
            );
            None
        }
    }
}
