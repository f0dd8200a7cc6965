//! The db tier: `GET /burn?ms=B` burns B ms of CPU on a db worker; `GET /health`.

use std::future::Future;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use crate::burn::BurnPool;
use crate::http::{self, method_not_allowed, not_found, text, BadRequest, Body, Handler, Query};

/// Configuration of the db tier.
#[derive(Debug, Clone)]
pub struct DbConfig {
    /// Worker threads that run CPU burns: at most this many burn at once.
    pub workers: usize,
}

impl Default for DbConfig {
    fn default() -> Self {
        DbConfig { workers: 2 }
    }
}

/// Serves the db tier on `listener` until `shutdown` completes.
pub async fn serve_db(
    listener: tokio::net::TcpListener,
    config: DbConfig,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let db = Arc::new(Db {
        pool: BurnPool::new("db-burn", config.workers)?,
    });
    http::serve(listener, db, shutdown).await
}

struct Db {
    pool: BurnPool,
}

impl Handler for Db {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        match self.route(&req).await {
            Ok(resp) => resp,
            Err(bad) => bad.into_response(),
        }
    }
}

impl Db {
    async fn route(&self, req: &Request<Incoming>) -> Result<Response<Body>, BadRequest> {
        let mut query = Query::parse(req.uri().query());
        match req.uri().path() {
            "/health" => Ok(text(StatusCode::OK, "ok\n")),
            "/burn" if req.method() != Method::GET => Ok(method_not_allowed("GET")),
            "/burn" => {
                let cpu = query.required_millis("ms")?;
                self.pool.burn(cpu).await;
                Ok(text(StatusCode::OK, "ok\n"))
            }
            path => Ok(not_found(path)),
        }
    }
}
