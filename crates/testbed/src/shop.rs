//! A small shop behind a login, for a user's whole journey: a form login
//! answered by a 303 and a session cookie, pages that need it, a cart
//! filled with JSON, a checkout answered by a redirect to the order. It
//! counts what it received (`GET /shop/stats`), so tests can assert that
//! cookies went back, redirects were followed and which protocol came.
//!
//! | request | answer |
//! |---|---|
//! | `POST /shop/login` (form `user`, `password=secret`) | 303 to /shop/account, `Set-Cookie: session=…; Path=/shop; HttpOnly`; 401 on a wrong password |
//! | `GET /shop/account` | `{"user", "cart", "csrf"}`: `csrf` is the token checkout wants |
//! | `GET /shop/products`, `GET /shop/products/{id}` | the catalogue, one product (no login needed) |
//! | `POST /shop/cart` (JSON `{"product": id}`) | 303 to /shop/cart; `GET /shop/cart`: `{"items", "count"}` |
//! | `POST /shop/checkout` (header `X-CSRF-Token` from the account page) | 303 to /shop/orders/{n}; 403 without the token, 409 with an empty cart; `GET /shop/orders/{n}`: `{"order", "status", "items"}` |
//! | `POST /shop/logout` | 303 to /shop/products, the cookie cleared |
//! | `GET /shop/stats` | the counters, by protocol and TLS too |
//!
//! Pages that need the session answer 401 `{"error": "login required"}`
//! without it. The CSRF token is a value a client must carry from one
//! answer into a later request that no cookie carries for it, as real
//! shops ask (what `autoperf import` of a HAR must correlate).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{COOKIE, LOCATION, SET_COOKIE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::http::{json, not_found, Body, OverTls};

/// Sessions kept at most; the oldest goes first.
const MAX_SESSIONS: usize = 100_000;
const MAX_BODY: usize = 64 * 1024;

const PRODUCTS: [(&str, &str, u32); 4] = [
    ("p1", "espresso cup", 12),
    ("p2", "moka pot", 35),
    ("p3", "coffee beans 1 kg", 24),
    ("p4", "grinder", 89),
];

#[derive(Default)]
pub struct Shop {
    sessions: Mutex<Sessions>,
    next: AtomicU64,
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Sessions {
    by_token: HashMap<String, Session>,
    age: VecDeque<String>,
}

struct Session {
    user: String,
    csrf: String,
    cart: Vec<String>,
    /// Order number and its item count.
    orders: Vec<(u64, usize)>,
}

#[derive(Default)]
struct Counts {
    logins: u64,
    failed_logins: u64,
    authorised: u64,
    unauthorised: u64,
    carts_added: u64,
    /// The most items any cart has held.
    largest_cart: u64,
    orders: u64,
    protocols: BTreeMap<String, u64>,
    tls: u64,
}

impl Shop {
    /// Answers a request under `/shop/`.
    pub async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        // Reading the counters is not part of any journey: it is not counted.
        if req.uri().path() != "/shop/stats" {
            let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            *counts
                .protocols
                .entry(format!("{:?}", req.version()))
                .or_default() += 1;
            counts.tls += u64::from(req.extensions().get::<OverTls>().is_some());
        }
        let token = session_token(&req);
        let csrf = req
            .headers()
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return json(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &json!({"error": "too large"}),
                )
            }
        };
        let rest = path.strip_prefix("/shop").unwrap_or_default();
        match (&method, rest) {
            (&Method::POST, "/login") => self.login(&body),
            (&Method::GET, "/products") => {
                let list: Vec<Value> = PRODUCTS.iter().map(product).collect();
                json(StatusCode::OK, &json!({ "products": list }))
            }
            (&Method::GET, p) if p.starts_with("/products/") => {
                let id = &p["/products/".len()..];
                match PRODUCTS.iter().find(|(pid, ..)| *pid == id) {
                    Some(p) => json(StatusCode::OK, &product(p)),
                    None => not_found(&path),
                }
            }
            (&Method::GET, "/stats") => json(StatusCode::OK, &self.stats()),
            (&Method::GET, "/account")
            | (&Method::POST, "/cart")
            | (&Method::GET, "/cart")
            | (&Method::POST, "/checkout")
            | (&Method::POST, "/logout") => self.with_session(token, |shop, token, s| {
                if method == Method::POST && rest == "/checkout" && csrf.as_deref() != Some(&s.csrf) {
                    return json(
                        StatusCode::FORBIDDEN,
                        &json!({"error": "missing or wrong X-CSRF-Token: send the `csrf` of GET /shop/account"}),
                    );
                }
                shop.member(&method, rest, token, s, &body)
            }),
            (&Method::GET, p) if p.starts_with("/orders/") => {
                let n = p["/orders/".len()..].parse::<u64>().ok();
                self.with_session(token, |_, _, s| {
                    match s.orders.iter().find(|(o, _)| Some(*o) == n) {
                        Some(&(order, items)) => json(
                            StatusCode::OK,
                            &json!({"order": order, "status": "confirmed", "items": items}),
                        ),
                        None => not_found(&path),
                    }
                })
            }
            _ => not_found(&path),
        }
    }

    fn login(&self, body: &[u8]) -> Response<Body> {
        let form = String::from_utf8_lossy(body);
        let field = |name: &str| {
            form.split('&')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_string)
        };
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let (Some(user), Some("secret")) = (field("user"), field("password").as_deref()) else {
            counts.failed_logins += 1;
            return json(
                StatusCode::UNAUTHORIZED,
                &json!({"error": "wrong user or password"}),
            );
        };
        counts.logins += 1;
        drop(counts);
        let token = format!(
            "s{:x}{:08x}",
            self.next.fetch_add(1, Relaxed),
            fastish_random()
        );
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sessions.age.len() >= MAX_SESSIONS {
            if let Some(old) = sessions.age.pop_front() {
                sessions.by_token.remove(&old);
            }
        }
        sessions.age.push_back(token.clone());
        sessions.by_token.insert(
            token.clone(),
            Session {
                user,
                csrf: format!("c{:08x}{:08x}", fastish_random(), fastish_random()),
                cart: Vec::new(),
                orders: Vec::new(),
            },
        );
        let mut resp = see_other("/shop/account");
        let cookie = format!("session={token}; Path=/shop; HttpOnly");
        resp.headers_mut()
            .insert(SET_COOKIE, cookie.parse().expect("a valid header"));
        resp
    }

    /// Runs `page` on the request's session, or answers 401.
    fn with_session(
        &self,
        token: Option<String>,
        page: impl FnOnce(&Shop, &str, &mut Session) -> Response<Body>,
    ) -> Response<Body> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let found = token.and_then(|t| sessions.by_token.get_mut(&t).map(|s| (t, s)));
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let Some((token, session)) = found else {
            counts.unauthorised += 1;
            return json(
                StatusCode::UNAUTHORIZED,
                &json!({"error": "login required"}),
            );
        };
        counts.authorised += 1;
        drop(counts);
        let resp = page(self, &token, session);
        if resp.headers().get(SET_COOKIE).is_some() {
            // Logged out.
            sessions.by_token.remove(&token);
        }
        resp
    }

    /// The pages that need a session.
    fn member(
        &self,
        method: &Method,
        page: &str,
        token: &str,
        s: &mut Session,
        body: &[u8],
    ) -> Response<Body> {
        let count =
            |f: fn(&mut Counts)| f(&mut self.counts.lock().unwrap_or_else(|e| e.into_inner()));
        match (method, page) {
            (&Method::GET, "/account") => json(
                StatusCode::OK,
                &json!({"user": s.user, "cart": format!("cart-{token}"), "csrf": s.csrf}),
            ),
            (&Method::GET, "/cart") => json(
                StatusCode::OK,
                &json!({"items": s.cart, "count": s.cart.len()}),
            ),
            (&Method::POST, "/cart") => {
                let wanted = serde_json::from_slice::<Value>(body)
                    .ok()
                    .and_then(|v| v.get("product")?.as_str().map(str::to_string));
                match wanted.filter(|id| PRODUCTS.iter().any(|(p, ..)| p == id)) {
                    Some(id) => {
                        s.cart.push(id);
                        let items = s.cart.len() as u64;
                        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
                        c.carts_added += 1;
                        c.largest_cart = c.largest_cart.max(items);
                        drop(c);
                        see_other("/shop/cart")
                    }
                    None => json(
                        StatusCode::BAD_REQUEST,
                        &json!({"error": "expected {\"product\": \"p1\"…\"p4\"}"}),
                    ),
                }
            }
            (&Method::POST, "/checkout") if s.cart.is_empty() => {
                json(StatusCode::CONFLICT, &json!({"error": "the cart is empty"}))
            }
            (&Method::POST, "/checkout") => {
                let order = self.next.fetch_add(1, Relaxed);
                s.orders.push((order, s.cart.len()));
                s.cart.clear();
                count(|c| c.orders += 1);
                see_other(&format!("/shop/orders/{order}"))
            }
            _ => {
                // POST /logout
                let mut resp = see_other("/shop/products");
                let gone = "session=; Path=/shop; Max-Age=0";
                resp.headers_mut()
                    .insert(SET_COOKIE, gone.parse().expect("a valid header"));
                resp
            }
        }
    }

    fn stats(&self) -> Value {
        let c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        json!({
            "logins": c.logins,
            "failed_logins": c.failed_logins,
            "authorised": c.authorised,
            "unauthorised": c.unauthorised,
            "carts_added": c.carts_added,
            "largest_cart": c.largest_cart,
            "orders": c.orders,
            "protocols": c.protocols,
            "tls": c.tls,
        })
    }
}

fn product(&(id, name, price): &(&str, &str, u32)) -> Value {
    json!({"id": id, "name": name, "price": price})
}

fn see_other(location: &str) -> Response<Body> {
    let mut resp = Response::new(Body::default());
    *resp.status_mut() = StatusCode::SEE_OTHER;
    resp.headers_mut()
        .insert(LOCATION, location.parse().expect("a valid header"));
    resp
}

/// The `session` cookie of the request, from any of its Cookie headers.
fn session_token(req: &Request<Incoming>) -> Option<String> {
    req.headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix("session="))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// Enough randomness that tokens are not guessed by a test by accident
/// (std's hasher keys are random per instance).
fn fastish_random() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish() as u32
}
