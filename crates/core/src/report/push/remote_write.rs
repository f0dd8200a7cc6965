//! Prometheus remote write 1.0: a `WriteRequest` of time series, protobuf
//! encoded (prost, with the messages of Prometheus's `remote.proto` and
//! `types.proto` that 1.0 uses), then snappy block-compressed.

use prost::Message;

use super::super::prometheus::{MetricPoint, MetricValue};
use super::RunLabels;

#[derive(Clone, PartialEq, Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TimeSeries {
    /// Sorted by name, `__name__` among them.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

pub(crate) const CONTENT_TYPE: &str = "application/x-protobuf";
pub(crate) const HEADERS: &[(&str, &str)] = &[
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

/// The series as `/metrics` names them (`_total`, `_bucket` with
/// cumulative `le`, `_sum`, `_count`), each with the run's labels.
pub fn write_request(points: &[MetricPoint], run: &RunLabels, now_ms: i64) -> WriteRequest {
    let mut timeseries = Vec::new();
    let mut series = |name: String,
                      labels: &[(&'static str, String)],
                      extra: Option<(&'static str, String)>,
                      value: f64| {
        let mut all: Vec<Label> = run
            .pairs()
            .chain(labels.iter().map(|(k, v)| (*k, v.clone())))
            .chain(extra)
            .map(|(name, value)| Label {
                name: name.to_string(),
                value,
            })
            .chain([Label {
                name: "__name__".into(),
                value: name,
            }])
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        timeseries.push(TimeSeries {
            labels: all,
            samples: vec![Sample {
                value,
                timestamp: now_ms,
            }],
        });
    };
    for p in points {
        match &p.value {
            MetricValue::Counter(v) => series(format!("{}_total", p.name), &p.labels, None, *v),
            MetricValue::Gauge(v) => series(p.name.to_string(), &p.labels, None, *v),
            MetricValue::Histogram {
                buckets,
                sum,
                count,
            } => {
                let mut cumulative = 0;
                for (le, n) in buckets {
                    cumulative += n;
                    let le = if le.is_infinite() {
                        "+Inf".to_string()
                    } else {
                        le.to_string()
                    };
                    let name = format!("{}_bucket", p.name);
                    series(name, &p.labels, Some(("le", le)), cumulative as f64);
                }
                series(format!("{}_sum", p.name), &p.labels, None, *sum);
                series(format!("{}_count", p.name), &p.labels, None, *count as f64);
            }
        }
    }
    WriteRequest { timeseries }
}

/// The request body: the protobuf, snappy block-compressed.
pub(crate) fn body(request: &WriteRequest) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .expect("snappy compresses any input that fits in memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_histograms_and_gauges_become_sorted_series_and_decode_back() {
        let points = vec![
            MetricPoint {
                name: "autoperf_requests",
                help: "",
                labels: vec![("request", "home".into()), ("status", "ok".into())],
                value: MetricValue::Counter(42.0),
            },
            MetricPoint {
                name: "autoperf_response_time_seconds",
                help: "",
                labels: vec![("request", "home".into())],
                value: MetricValue::Histogram {
                    buckets: vec![(0.01, 3), (f64::INFINITY, 1)],
                    sum: 0.5,
                    count: 4,
                },
            },
            MetricPoint {
                name: "autoperf_active_users",
                help: "",
                labels: vec![],
                value: MetricValue::Gauge(7.0),
            },
        ];
        let run = RunLabels {
            scenario: "shop".into(),
            run: "r1".into(),
        };
        let body = body(&write_request(&points, &run, 1000));
        let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        let back = WriteRequest::decode(&raw[..]).unwrap();
        let names: Vec<String> = back
            .timeseries
            .iter()
            .map(|t| {
                t.labels
                    .iter()
                    .find(|l| l.name == "__name__")
                    .unwrap()
                    .value
                    .clone()
            })
            .collect();
        assert_eq!(
            names,
            [
                "autoperf_requests_total",
                "autoperf_response_time_seconds_bucket",
                "autoperf_response_time_seconds_bucket",
                "autoperf_response_time_seconds_sum",
                "autoperf_response_time_seconds_count",
                "autoperf_active_users"
            ]
        );
        let inf = &back.timeseries[2];
        assert!(inf
            .labels
            .iter()
            .any(|l| l.name == "le" && l.value == "+Inf"));
        assert_eq!(inf.samples[0].value, 4.0, "buckets are cumulative");
        for t in &back.timeseries {
            assert!(t.labels.windows(2).all(|w| w[0].name < w[1].name), "sorted");
            assert!(t
                .labels
                .iter()
                .any(|l| l.name == "job" && l.value == "autoperf"));
            assert_eq!(t.samples[0].timestamp, 1000);
        }
    }
}
