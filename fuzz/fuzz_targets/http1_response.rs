//! The HTTP/1.1 response reader: whatever a server sends, cut into reads of
//! any size, an exchange ends with a reply or an error kind, never a panic
//! or a hang, and a reply's body is as long as it says.
//!
//! Input: byte 0 sets the read size (1..=256, or whole), byte 1 whether the
//! request was a HEAD and whether the body is kept; the rest is the answer.
#![no_main]
use autoperf_core::protocol::http1::Connection;
use autoperf_core::protocol::Response;
use libfuzzer_sys::fuzz_target;

thread_local! {
    static RUNTIME: tokio::runtime::Runtime =
        tokio::runtime::Builder::new_current_thread().build().unwrap();
}

fuzz_target!(|data: &[u8]| {
    let [step, flags, answer @ ..] = data else {
        return;
    };
    let step = if *step == 255 {
        usize::MAX
    } else {
        1 + *step as usize
    };
    let head_request = flags & 1 != 0;
    let keep = flags & 2 != 0;
    let mut conn = Connection::replaying(answer.to_vec(), step);
    RUNTIME.with(|rt| {
        rt.block_on(async {
            // Twice: a keep-alive connection reads its next answer after the first.
            for _ in 0..2 {
                let mut response = Response::default();
                let mut notable = Vec::new();
                let got = conn
                    .exchange(
                        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                        head_request,
                        keep.then_some(&mut response),
                        &mut notable,
                    )
                    .await;
                match got {
                    Ok(reply) => {
                        assert!(
                            (100..1000).contains(&reply.status),
                            "status {}",
                            reply.status
                        );
                        if keep {
                            assert_eq!(response.body.len() as u64, reply.body_len);
                            assert!(answer.len() >= response.head.len() + response.body.len());
                        }
                        if reply.close {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        })
    });
});
