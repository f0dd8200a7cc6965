use super::head::find_byte;
use super::*;

fn exchange_all(
    answer: &[u8],
    step: usize,
    times: usize,
) -> Vec<Result<(u16, Vec<u8>), ErrorKind>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut conn = Connection::replaying(answer.to_vec(), step);
    rt.block_on(async {
        let mut out = Vec::new();
        for _ in 0..times {
            let mut response = super::super::Response::default();
            let got = conn
                .exchange(
                    b"GET / HTTP/1.1\r\n\r\n",
                    false,
                    Some(&mut response),
                    &mut Vec::new(),
                )
                .await;
            out.push(got.map(|r| (r.status, response.body)).map_err(|f| f.kind));
        }
        out
    })
}

#[test]
fn a_response_reads_the_same_however_the_bytes_arrive() {
    let chunked =
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: x\r\n\r\n";
    let sized = b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\ngone";
    let overlong = [&sized[..], b"!"].concat();
    let until_close = b"HTTP/1.0 200 OK\r\n\r\nto the end";
    for step in [1, 2, 3, 7, 64, 1 << 20] {
        assert_eq!(
            exchange_all(chunked, step, 1),
            [Ok((200, b"hello, world".to_vec()))],
            "step {step}"
        );
        assert_eq!(exchange_all(sized, step, 1), [Ok((404, b"gone".to_vec()))]);
        // More than announced: an error now or at the next exchange.
        let got = exchange_all(&overlong, step, 2);
        assert!(got.iter().any(|r| r.is_err()), "step {step}: {got:?}");
        assert_eq!(
            exchange_all(until_close, step, 1),
            [Ok((200, b"to the end".to_vec()))]
        );
        // Cut anywhere, a response is an error, never a success or a hang.
        for cut in 0..chunked.len() {
            let got = exchange_all(&chunked[..cut], step.min(8), 1);
            assert!(got[0].is_err(), "cut at {cut}: {got:?}");
        }
    }
}

#[test]
fn a_head_past_its_limit_is_malformed_however_it_arrives() {
    // 5,000 cookies: 88 KiB of head.
    let cookies: String = (0..5000)
        .map(|i| format!("Set-Cookie: c{i}=v\r\n"))
        .collect();
    let answer = format!("HTTP/1.1 200 OK\r\n{cookies}Content-Length: 2\r\n\r\nok");
    assert!(answer.len() > MAX_HEAD);
    for step in [1 << 20, 64 * 1024, 4096] {
        let got = exchange_all(answer.as_bytes(), step, 1);
        assert_eq!(got, [Err(ErrorKind::Malformed)], "step {step}");
    }
}

#[test]
fn a_kept_body_stops_at_max_body_and_is_read_to_its_end() {
    let body = "x".repeat(10_000);
    let sized = format!("HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n{body}");
    let chunked =
        format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2710\r\n{body}\r\n0\r\n\r\n");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for answer in [sized, chunked] {
        for step in [1000, 1 << 20] {
            let mut conn = Connection::replaying(answer.clone().into_bytes(), step);
            let mut response = super::super::Response {
                max_body: 4096,
                ..Default::default()
            };
            let reply = rt
                .block_on(conn.exchange(
                    b"GET / HTTP/1.1\r\n\r\n",
                    false,
                    Some(&mut response),
                    &mut Vec::new(),
                ))
                .unwrap();
            // Read to its end (and framed right), kept only so far.
            assert_eq!(reply.body_len, 10_000);
            assert_eq!(response.body, body.as_bytes()[..4096]);
            assert!(response.cut(reply.body_len));
        }
    }
}

#[test]
fn head_framing() {
    let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false)
        .unwrap()
        .unwrap();
    assert_eq!(h.status, 200);
    assert_eq!(h.framing, Framing::Length(5));
    assert!(!h.close);
    let h = parse_head(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n",
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!(h.framing, Framing::Chunked);
    assert!(h.close);
    let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\n", false)
        .unwrap()
        .unwrap();
    assert_eq!(h.framing, Framing::UntilClose);
    assert!(h.close);
    let h = parse_head(
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!(h.framing, Framing::None);
    assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le", false)
        .unwrap()
        .is_none());
    assert!(parse_head(b"garbage\r\n\r\n", false).is_err());
    assert!(parse_head(b"garbage garbage garbage", false).is_err());
    assert!(parse_head(b"HTTP/1.1 2x0 OK\r\n\r\n", false).is_err());
    assert!(parse_head(b"HTTP/1.1 200 OK\r\nNo colon\r\n\r\n", false).is_err());
    assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", false).is_err());
    // Bare LF line ends, a head split before its end, and the head length.
    let h = parse_head(b"HTTP/1.1 404 Not Found\ncontent-length: 0\n\nrest", false)
        .unwrap()
        .unwrap();
    assert_eq!((h.status, h.len, h.framing), (404, 42, Framing::Length(0)));
    assert!(parse_head(b"HTTP/1.1 200 OK\r\nA: b\r\n", false)
        .unwrap()
        .is_none());
    assert!(parse_head(b"HTTP/1.", false).unwrap().is_none());
    // Statuses outside 1xx–5xx, and an upgrade never asked for.
    assert!(parse_head(b"HTTP/1.1 999 Odd\r\n\r\n", false).is_err());
    assert!(parse_head(b"HTTP/1.1 099 Odd\r\n\r\n", false).is_err());
    assert!(parse_head(b"HTTP/1.1 101 Switching\r\n\r\n", false).is_err());
    let h = parse_head(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", false)
        .unwrap()
        .unwrap();
    assert_eq!((h.status, h.len, h.framing), (100, 25, Framing::None));
}

#[test]
fn find_byte_matches_a_plain_search() {
    let hay = b"Server: nginx\r\nContent-Length: 100\r\n\r\n:\n";
    for start in 0..hay.len() {
        for needle in [b'\n', b':', b'x', 0x8a, b'\r'] {
            let plain = hay[start..].iter().position(|&c| c == needle);
            assert_eq!(find_byte(needle, &hay[start..]), plain, "{start} {needle}");
        }
    }
    assert_eq!(find_byte(0xff, &[0x7f, 0xfe, 0xff]), Some(2));
}

#[test]
fn chunk_sizes() {
    assert_eq!(parse_chunk_size(b"1a"), Some(26));
    assert_eq!(parse_chunk_size(b"0;ext=1"), Some(0));
    assert_eq!(parse_chunk_size(b"zz"), None);
    assert_eq!(parse_chunk_size(b""), None);
}
