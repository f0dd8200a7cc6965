//! OTLP/HTTP metrics: an `ExportMetricsServiceRequest` (the OpenTelemetry
//! project's generated messages), protobuf encoded. Counters are
//! cumulative monotonic sums, the response time an explicit-bucket
//! histogram, the rest gauges; the run's labels are resource attributes.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Histogram, HistogramDataPoint,
    Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use super::super::prometheus::{MetricPoint, MetricValue};
use super::RunLabels;

pub(crate) const CONTENT_TYPE: &str = "application/x-protobuf";

fn attribute(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        ..Default::default()
    }
}

/// `start_ns`: when the run's counting began; `now_ns`: this export.
pub fn export_request(
    points: &[MetricPoint],
    run: &RunLabels,
    start_ns: u64,
    now_ns: u64,
) -> ExportMetricsServiceRequest {
    let cumulative = AggregationTemporality::Cumulative as i32;
    // One metric per name, a data point per label set, in the order given.
    let mut metrics: Vec<Metric> = Vec::new();
    for p in points {
        let attributes: Vec<KeyValue> = p
            .labels
            .iter()
            .map(|(k, v)| attribute(k, v.clone()))
            .collect();
        let number = |v: f64| NumberDataPoint {
            attributes: attributes.clone(),
            start_time_unix_nano: start_ns,
            time_unix_nano: now_ns,
            value: Some(number_data_point::Value::AsDouble(v)),
            ..Default::default()
        };
        let index = match metrics.iter().position(|m| m.name == p.name) {
            Some(i) => i,
            None => {
                let data = match p.value {
                    MetricValue::Counter(_) => metric::Data::Sum(Sum {
                        data_points: Vec::new(),
                        aggregation_temporality: cumulative,
                        is_monotonic: true,
                    }),
                    MetricValue::Gauge(_) => metric::Data::Gauge(Gauge::default()),
                    MetricValue::Histogram { .. } => metric::Data::Histogram(Histogram {
                        data_points: Vec::new(),
                        aggregation_temporality: cumulative,
                    }),
                };
                metrics.push(Metric {
                    name: p.name.to_string(),
                    description: p.help.to_string(),
                    unit: if p.name.ends_with("_seconds") {
                        "s"
                    } else {
                        "1"
                    }
                    .to_string(),
                    data: Some(data),
                    ..Default::default()
                });
                metrics.len() - 1
            }
        };
        match (&mut metrics[index].data, &p.value) {
            (Some(metric::Data::Sum(s)), MetricValue::Counter(v)) => s.data_points.push(number(*v)),
            (Some(metric::Data::Gauge(g)), MetricValue::Gauge(v)) => g.data_points.push(number(*v)),
            (
                Some(metric::Data::Histogram(h)),
                MetricValue::Histogram {
                    buckets,
                    sum,
                    count,
                },
            ) => h.data_points.push(HistogramDataPoint {
                attributes: attributes.clone(),
                start_time_unix_nano: start_ns,
                time_unix_nano: now_ns,
                count: *count,
                sum: Some(*sum),
                bucket_counts: buckets.iter().map(|(_, n)| *n).collect(),
                explicit_bounds: buckets
                    .iter()
                    .map(|(le, _)| *le)
                    .filter(|le| le.is_finite())
                    .collect(),
                ..Default::default()
            }),
            _ => {} // one name, one kind: the registry's metrics are fixed
        }
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![
                    attribute("service.name", "autoperf".into()),
                    attribute("autoperf.scenario", run.scenario.clone()),
                    attribute("autoperf.run", run.run.clone()),
                ],
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "autoperf".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

pub(crate) fn body(request: &ExportMetricsServiceRequest) -> Vec<u8> {
    request.encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_histograms_and_gauges_with_the_run_as_resource() {
        let points = vec![
            MetricPoint {
                name: "autoperf_requests",
                help: "Requests",
                labels: vec![("request", "a".into()), ("status", "ok".into())],
                value: MetricValue::Counter(5.0),
            },
            MetricPoint {
                name: "autoperf_requests",
                help: "Requests",
                labels: vec![("request", "b".into()), ("status", "ok".into())],
                value: MetricValue::Counter(6.0),
            },
            MetricPoint {
                name: "autoperf_response_time_seconds",
                help: "",
                labels: vec![("request", "a".into())],
                value: MetricValue::Histogram {
                    buckets: vec![(0.01, 3), (0.1, 0), (f64::INFINITY, 1)],
                    sum: 0.5,
                    count: 4,
                },
            },
        ];
        let run = RunLabels {
            scenario: "shop".into(),
            run: "r1".into(),
        };
        let body = body(&export_request(&points, &run, 1, 2));
        let back = ExportMetricsServiceRequest::decode(&body[..]).unwrap();
        let scope = &back.resource_metrics[0].scope_metrics[0];
        assert_eq!(scope.metrics.len(), 2);
        let Some(metric::Data::Sum(sum)) = &scope.metrics[0].data else {
            panic!("a sum")
        };
        assert!(sum.is_monotonic);
        assert_eq!(sum.data_points.len(), 2);
        let Some(metric::Data::Histogram(h)) = &scope.metrics[1].data else {
            panic!("a histogram")
        };
        assert_eq!(h.data_points[0].explicit_bounds, [0.01, 0.1]);
        assert_eq!(h.data_points[0].bucket_counts, [3, 0, 1]);
        let resource = back.resource_metrics[0].resource.as_ref().unwrap();
        assert!(resource
            .attributes
            .iter()
            .any(|kv| kv.key == "autoperf.scenario"));
    }
}
