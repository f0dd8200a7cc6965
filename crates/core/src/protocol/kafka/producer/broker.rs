//! One connection per broker, run by a task of its own while the broker has
//! records to send: a writer that sends Produce requests as batches fill or
//! linger ends, a reader that settles their answers, reconnection with
//! backoff.

use std::rc::Rc;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::Notify;

use crate::measure::ErrorKind;

use super::super::wire;
use super::connection::{init_producer_id, io_kind, open, Conn};
use super::state::*;

impl Producer {
    /// What broker `b`'s task should do next.
    pub(super) fn next_step(&self, b: usize) -> Step {
        let config = &self.0.config;
        let st = self.0.state.borrow();
        let broker = &st.brokers[b];
        let wake = broker.wake.clone();
        let Some(oldest) = broker.oldest.filter(|_| !broker.retiring) else {
            return Step::Wait(wake, None);
        };
        if broker.in_flight.len() >= config.max_in_flight {
            return Step::Wait(wake, None);
        }
        let due = oldest + config.linger;
        if broker.full || Instant::now() >= due {
            Step::Send
        } else {
            Step::Wait(wake, Some(due))
        }
    }

    /// When the oldest request to broker `b` times out, if any is in flight.
    pub(super) fn request_deadline(&self, b: usize) -> Option<Instant> {
        let st = self.0.state.borrow();
        let sent = st.brokers[b].in_flight.front()?.sent;
        Some(sent + self.0.config.timeout)
    }
}

pub(super) enum Step {
    Send,
    Wait(Rc<Notify>, Option<Instant>),
}

/// Keeps one connection to broker `b` while it has records to send:
/// connects, serves, and on failure fails what depended on it and
/// reconnects with backoff.
pub(super) async fn broker_task(producer: Producer, b: usize) {
    let mut backoff = BACKOFF.0;
    loop {
        // Nothing to send: no connection needed yet.
        loop {
            let (waiting, wake) = {
                let st = producer.0.state.borrow();
                (st.brokers[b].oldest.is_some(), st.brokers[b].wake.clone())
            };
            if waiting {
                break;
            }
            wake.notified().await;
        }
        let addr = producer.0.state.borrow().brokers[b].addr.clone();
        let config = &producer.0.config;
        let opened = match open(&addr, config).await {
            Ok(mut opened) if config.idempotence => {
                let asked = init_producer_id(&mut opened.conn, config);
                match tokio::time::timeout(config.timeout, asked).await {
                    Ok(Ok(session)) => {
                        producer.state().brokers[b].idempotent = Some(session);
                        Ok(opened)
                    }
                    Ok(Err(failed)) => Err(failed),
                    Err(_) => Err(ErrorKind::Timeout.into()),
                }
            }
            opened => opened,
        };
        match opened {
            Ok(connection) => {
                let opened = Instant::now();
                // Retired before the broker ends its SASL session, so what
                // is in flight is answered first.
                let retire_at = connection
                    .session_lifetime
                    .map(|lifetime| opened + lifetime.mul_f64(0.8));
                let kind = serve(&producer, b, connection.conn, retire_at).await;
                {
                    let mut st = producer.state();
                    st.brokers[b].idempotent = None;
                    st.brokers[b].retiring = false;
                    st.brokers[b].bump_epoch = false;
                }
                producer.fail_in_flight(b, kind);
                // Batches it refused go back in their queues before the
                // next connection sends, so they keep their places.
                while producer.state().brokers[b].requeues_pending > 0 {
                    tokio::time::sleep(REQUEUE_POLL).await;
                }
                if opened.elapsed() < BACKOFF.1 {
                    // Accepted, then dropped at once (a port that speaks
                    // something else, a connection limit): no tight loop.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF.1);
                } else {
                    backoff = BACKOFF.0;
                }
            }
            Err(failed) => {
                producer.fail_open(b, failed.kind);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF.1);
            }
        }
    }
}

/// Runs one connection until it fails, or is retired and all it had in
/// flight is answered; returns how it ended.
async fn serve(
    producer: &Producer,
    b: usize,
    stream: Conn,
    retire_at: Option<Instant>,
) -> ErrorKind {
    let (read, write) = tokio::io::split(stream);
    tokio::select! {
        kind = writer(producer, b, write) => kind,
        kind = reader(producer, b, read, retire_at) => kind,
    }
}

async fn writer(producer: &Producer, b: usize, mut write: WriteHalf<Conn>) -> ErrorKind {
    let mut out = Vec::new();
    loop {
        match producer.next_step(b) {
            Step::Send => {
                out.clear();
                producer.drain(b, &mut out);
                // A broker that stops reading must not hold records (with
                // acks=0, nothing in flight would time out) past the timeout.
                let timeout = producer.0.config.timeout;
                match tokio::time::timeout(timeout, write.write_all(&out)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return io_kind(&e),
                    Err(_) => return ErrorKind::Timeout,
                }
            }
            Step::Wait(wake, None) => wake.notified().await,
            Step::Wait(wake, Some(due)) => {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep_until(due.into()) => {}
                }
            }
        }
    }
}

/// How often a connection that waits to bump its epoch, or a broker's task
/// that waits to connect again, looks whether its refused batches are back
/// in their queues (they wait `retry.backoff.ms`).
const REQUEUE_POLL: std::time::Duration = std::time::Duration::from_millis(5);

async fn reader(
    producer: &Producer,
    b: usize,
    mut read: ReadHalf<Conn>,
    retire_at: Option<Instant>,
) -> ErrorKind {
    let mut buf: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut at = 0;
    loop {
        // Every whole response in the buffer.
        while buf.len() - at >= 4 {
            let size = i32::from_be_bytes(buf[at..at + 4].try_into().unwrap());
            let size = match usize::try_from(size) {
                Ok(size) if size <= wire::MAX_RESPONSE => size,
                _ => return ErrorKind::Malformed,
            };
            if buf.len() - at - 4 < size {
                break;
            }
            if let Err(kind) = producer.answered(b, &buf[at + 4..at + 4 + size]) {
                return kind;
            }
            at += 4 + size;
        }
        buf.drain(..at);
        at = 0;
        if retire_at.is_some_and(|t| Instant::now() >= t) {
            producer.state().brokers[b].retiring = true;
        }
        let requeues_pending = {
            let mut st = producer.state();
            let broker = &mut st.brokers[b];
            let mut pending = false;
            if broker.retiring && broker.in_flight.is_empty() {
                match broker.idempotent.as_mut().filter(|_| broker.bump_epoch) {
                    // The refused batches go back in their queues first, so
                    // they keep their places before the batches sent after.
                    Some(_) if broker.requeues_pending > 0 => pending = true,
                    // Its sequences were lost: a new epoch, and on.
                    Some(session) => {
                        session.bump();
                        broker.bump_epoch = false;
                        broker.retiring = false;
                        broker.wake.notify_one();
                    }
                    // Nothing is lost: the records waiting go on the next.
                    None => return ErrorKind::Closed,
                }
            }
            pending
        };
        if requeues_pending {
            // Nothing is in flight to read: look again in a moment.
            tokio::time::sleep(REQUEUE_POLL).await;
            continue;
        }
        let deadline = producer.request_deadline(b);
        let mut check = deadline.unwrap_or_else(|| Instant::now() + producer.0.config.timeout);
        if let Some(t) = retire_at {
            check = check.min(t.max(Instant::now()));
        }
        tokio::select! {
            read = read.read_buf(&mut buf) => match read {
                Ok(0) => return ErrorKind::Closed,
                Ok(_) => {}
                Err(e) => return io_kind(&e),
            },
            _ = tokio::time::sleep_until(check.into()) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return ErrorKind::Timeout;
                }
            }
        }
        if buf.capacity() - buf.len() < 16 << 10 {
            buf.reserve(64 << 10);
        }
    }
}
