//! The stub schema registry over HTTP, in the order a producer's serializer
//! and a consumer's deserializer call it.

use crate::common;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{get, send};
use autoperf_testbed::registry::{Hits, SchemaRegistry};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const MEDIA: &str = "application/vnd.schemaregistry.v1+json";

const SENSOR: &str = r#"{"type":"record","name":"ActivePowerRecord","namespace":"titan.ccp.model.records","fields":[{"name":"identifier","type":"string"},{"name":"timestamp","type":"long"},{"name":"valueInW","type":"double"}]}"#;

fn body(resp: &common::Response) -> Value {
    serde_json::from_slice(&resp.body).unwrap_or_else(|e| panic!("{e}: not JSON: {}", resp.text()))
}

async fn post(addr: std::net::SocketAddr, path: &str, payload: &Value) -> common::Response {
    send(
        addr,
        Method::POST,
        path,
        &[("content-type", MEDIA), ("accept", MEDIA)],
        &payload.to_string(),
    )
    .await
}

#[tokio::test]
async fn serves_what_serializers_and_deserializers_call() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let registry = Arc::new(SchemaRegistry::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(Arc::clone(&registry).serve(listener, async {
        let _ = stopped.await;
    }));

    // A producer asks which subject the topic is bound to (none)…
    let resp = get(
        addr,
        "/associations/resources/-/sensors?resourceType=topic&associationType=value",
    )
    .await;
    assert_eq!(body(&resp), json!([]));
    // …registers its value schema under TOPIC-value…
    let resp = post(
        addr,
        "/subjects/sensors-value/versions?normalize=false",
        &json!({ "schema": SENSOR, "schemaType": "AVRO" }),
    )
    .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text());
    assert_eq!(resp.headers["content-type"], MEDIA);
    let id = body(&resp)["id"].as_u64().expect("an id");
    // …and again after a restart, with other whitespace: the same id.
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<Value>(SENSOR).unwrap()).unwrap();
    let again = post(
        addr,
        "/subjects/sensors-value/versions",
        &json!({ "schema": pretty }),
    )
    .await;
    assert_eq!(body(&again)["id"].as_u64(), Some(id));

    // A consumer's deserializer fetches the schema by the id in the record.
    let resp = get(addr, &format!("/schemas/ids/{id}?subject=sensors-value")).await;
    assert_eq!(resp.status, StatusCode::OK);
    assert_eq!(body(&resp), json!({ "schema": SENSOR }));

    let resp = get(addr, "/subjects/sensors-value/versions/latest").await;
    assert_eq!(
        body(&resp),
        json!({ "subject": "sensors-value", "version": 1, "id": id, "schema": SENSOR })
    );
    assert_eq!(
        body(&get(addr, "/subjects/sensors-value/versions/1").await)["id"],
        json!(id)
    );
    assert_eq!(
        body(&get(addr, "/subjects/sensors-value/versions").await),
        json!([1])
    );
    assert_eq!(
        body(&get(addr, "/subjects").await),
        json!(["sensors-value"])
    );
    assert_eq!(
        body(&get(addr, &format!("/schemas/ids/{id}/versions")).await),
        json!([{ "subject": "sensors-value", "version": 1 }])
    );
    let found = post(
        addr,
        "/subjects/sensors-value",
        &json!({ "schema": SENSOR }),
    )
    .await;
    assert_eq!(body(&found)["version"], json!(1));

    // Errors in the registry's format, with its codes.
    for (resp, status, code) in [
        (get(addr, "/schemas/ids/999").await, 404, 40403),
        (
            get(addr, "/subjects/other-value/versions/latest").await,
            404,
            40401,
        ),
        (
            get(addr, "/subjects/sensors-value/versions/7").await,
            404,
            40402,
        ),
        (
            post(
                addr,
                "/subjects/sensors-value/versions",
                &json!({ "schema": "{oops" }),
            )
            .await,
            422,
            42201,
        ),
        (
            post(
                addr,
                "/subjects/sensors-value",
                &json!({ "schema": "\"int\"" }),
            )
            .await,
            404,
            40403,
        ),
    ] {
        assert_eq!(resp.status.as_u16(), status, "{}", resp.text());
        assert_eq!(body(&resp)["error_code"], json!(code), "{}", resp.text());
    }

    assert_eq!(
        registry.hits(),
        Hits {
            register: 3,
            lookup: 2,
            by_id: 3,
            other: 7,
        }
    );
    assert_eq!(registry.schema(id as u32).as_deref(), Some(SENSOR));

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("registry stops within 5 s")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_schema_registered_in_process_is_served() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let registry = Arc::new(SchemaRegistry::default());
    let id = registry.register("fixed-value", SENSOR).unwrap();
    assert!(registry.register("fixed-value", "{oops").is_err());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(Arc::clone(&registry).serve(listener, async {
        let _ = stopped.await;
    }));
    assert_eq!(
        body(&get(addr, &format!("/schemas/ids/{id}")).await)["schema"],
        json!(SENSOR)
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
