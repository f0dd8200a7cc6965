//! SASL's client side for the mechanisms Kafka brokers offer: PLAIN
//! (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and OAUTHBEARER with
//! a static token (RFC 7628), as the messages SaslAuthenticate requests
//! carry. Pure: no I/O.
//!
//! ```text
//!  PLAIN  client: \0user\0password                             → done
//!  OAUTHBEARER  client: n,,^Aauth=Bearer token^A^A            → done
//!         (refused: server: {"status":…}  client: ^A  → the broker's error)
//!  SCRAM  client: n,,n=user,r=cnonce
//!         server: r=cnonce+snonce,s=salt,i=iterations
//!         client: c=biws,r=cnonce+snonce,p=proof
//!         server: v=signature                                  → checked, done
//! ```
//!
//! SCRAM is written here over ring's HMAC and PBKDF2 (ring is already in
//! the build, for rustls): the `scram` crate is unmaintained and would
//! bring a second, older ring.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2, rand::SecureRandom};

use crate::scenario::{SaslMechanism, SaslSettings};

/// The PBKDF2 iterations a server may ask for: Kafka's own bounds. Fewer
/// would let a false server guess the password from the proof cheaply; more
/// would be a server spending the client's CPU.
const ITERATIONS: std::ops::RangeInclusive<u32> = 4096..=16_384;

/// One authentication, message by message.
pub(crate) enum Exchange {
    Plain {
        message: Vec<u8>,
    },
    OAuthBearer {
        message: Vec<u8>,
        /// The server sent its error; the client's `^A` ends the exchange.
        refused: bool,
    },
    Scram(Scram),
}

pub(crate) struct Scram {
    hash: Hash,
    username: String,
    password: String,
    nonce: String,
    /// What the server's final message must prove, once the proof is sent.
    server_signature: Option<Vec<u8>>,
}

#[derive(Clone, Copy)]
struct Hash {
    hmac: hmac::Algorithm,
    pbkdf2: pbkdf2::Algorithm,
    digest: &'static digest::Algorithm,
}

impl Exchange {
    pub(crate) fn new(sasl: &SaslSettings) -> Exchange {
        let hash = match sasl.mechanism {
            SaslMechanism::Plain => {
                let mut message = vec![0];
                message.extend_from_slice(sasl.username.as_bytes());
                message.push(0);
                message.extend_from_slice(sasl.password.as_bytes());
                return Exchange::Plain { message };
            }
            SaslMechanism::OAuthBearer => {
                let message = format!("n,,\x01auth=Bearer {}\x01\x01", sasl.password);
                return Exchange::OAuthBearer {
                    message: message.into_bytes(),
                    refused: false,
                };
            }
            SaslMechanism::ScramSha256 => Hash {
                hmac: hmac::HMAC_SHA256,
                pbkdf2: pbkdf2::PBKDF2_HMAC_SHA256,
                digest: &digest::SHA256,
            },
            SaslMechanism::ScramSha512 => Hash {
                hmac: hmac::HMAC_SHA512,
                pbkdf2: pbkdf2::PBKDF2_HMAC_SHA512,
                digest: &digest::SHA512,
            },
        };
        let mut random = [0u8; 24];
        ring::rand::SystemRandom::new()
            .fill(&mut random)
            .expect("the system's random source");
        Exchange::Scram(Scram {
            hash,
            username: sasl.username.clone(),
            password: sasl.password.clone(),
            nonce: B64.encode(random),
            server_signature: None,
        })
    }

    /// The client's first message.
    pub(crate) fn first(&self) -> Vec<u8> {
        match self {
            Exchange::Plain { message } | Exchange::OAuthBearer { message, .. } => message.clone(),
            Exchange::Scram(s) => format!("n,,{}", s.first_bare()).into_bytes(),
        }
    }

    /// The client's answer to the server's message `server`, or `None`
    /// when the exchange is over; an error says what the server got wrong.
    pub(crate) fn next(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match self {
            Exchange::Plain { .. } => Ok(None),
            // RFC 7628 3.2.2: an error from the server is answered with a
            // lone ^A, after which the server fails the authentication.
            Exchange::OAuthBearer { refused, .. } if !server.is_empty() && !*refused => {
                *refused = true;
                Ok(Some(vec![1]))
            }
            Exchange::OAuthBearer { .. } => Ok(None),
            Exchange::Scram(s) => s.next(server),
        }
    }
}

impl Scram {
    fn first_bare(&self) -> String {
        // RFC 5802 5.1: `=` and `,` in a name are escaped.
        let name = self.username.replace('=', "=3D").replace(',', "=2C");
        format!("n={name},r={}", self.nonce)
    }

    fn next(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let text = std::str::from_utf8(server).map_err(|_| "a SCRAM message not in UTF-8")?;
        let field = |key: char| {
            text.split(',')
                .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
        };
        if let Some(expected) = &self.server_signature {
            // The server's final message: it must know the password too.
            if let Some(error) = field('e') {
                return Err(format!("the server ended SCRAM with `{error}`"));
            }
            let proof = field('v')
                .and_then(|v| B64.decode(v).ok())
                .ok_or("a SCRAM final message without a signature")?;
            // Not secret: a fresh nonce makes every signature new.
            return if proof == *expected {
                Ok(None)
            } else {
                Err("the server's SCRAM signature is wrong: it does not hold this user's credentials".into())
            };
        }
        let nonce = field('r').ok_or("a SCRAM message without a nonce")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the server's SCRAM nonce does not extend the client's".into());
        }
        let salt = field('s')
            .and_then(|s| B64.decode(s).ok())
            .ok_or("a SCRAM message without a salt")?;
        let iterations = field('i')
            .and_then(|i| i.parse::<u32>().ok())
            .filter(|i| ITERATIONS.contains(i))
            .ok_or(format!(
                "a SCRAM iteration count that is not from {} to {}",
                ITERATIONS.start(),
                ITERATIONS.end()
            ))?;
        let h = self.hash;
        let mut salted = vec![0u8; h.digest.output_len()];
        pbkdf2::derive(
            h.pbkdf2,
            std::num::NonZeroU32::new(iterations).expect("checked above"),
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let key = hmac::Key::new(h.hmac, &salted);
        let client_key = hmac::sign(&key, b"Client Key");
        let stored_key = digest::digest(h.digest, client_key.as_ref());
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.first_bare());
        let signature = hmac::sign(
            &hmac::Key::new(h.hmac, stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac::sign(&key, b"Server Key");
        self.server_signature = Some(
            hmac::sign(
                &hmac::Key::new(h.hmac, server_key.as_ref()),
                auth_message.as_bytes(),
            )
            .as_ref()
            .to_vec(),
        );
        Ok(Some(
            format!("{without_proof},p={}", B64.encode(proof)).into_bytes(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scram(mechanism: SaslMechanism, user: &str, password: &str, nonce: &str) -> Scram {
        let Exchange::Scram(mut s) = Exchange::new(&SaslSettings {
            mechanism,
            username: user.into(),
            password: password.into(),
        }) else {
            unreachable!()
        };
        s.nonce = nonce.into();
        s
    }

    #[test]
    fn scram_sha256_matches_rfc_7677() {
        // RFC 7677 section 3's example exchange.
        let mut s = scram(
            SaslMechanism::ScramSha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(s.first_bare(), "n=user,r=rOprNGfwEbeRWgbNEkqO");
        let last = s
            .next(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap()
            .unwrap();
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            s.next(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
                .unwrap(),
            None
        );
    }

    #[test]
    fn a_server_without_the_password_is_caught() {
        let mut s = scram(SaslMechanism::ScramSha512, "u", "p", "abc");
        s.next(b"r=abcdef,s=c2FsdA==,i=4096").unwrap();
        let e = s.next(b"v=AAAA").unwrap_err();
        assert!(e.contains("signature is wrong"), "{e}");
        let mut s = scram(SaslMechanism::ScramSha512, "u", "p", "abc");
        assert!(s.next(b"r=xyz,s=c2FsdA==,i=4096").is_err(), "foreign nonce");
        let mut s = scram(SaslMechanism::ScramSha512, "u", "p", "abc");
        let e = s.next(b"r=abcdef,s=c2FsdA==,i=99999999").unwrap_err();
        assert!(e.contains("iteration"), "{e}");
    }

    #[test]
    fn oauthbearer_sends_its_token_and_ends_a_refusal() {
        let mut e = Exchange::new(&SaslSettings {
            mechanism: SaslMechanism::OAuthBearer,
            username: String::new(),
            password: "tok.en.".into(),
        });
        assert_eq!(e.first(), b"n,,\x01auth=Bearer tok.en.\x01\x01");
        assert_eq!(e.next(b"{\"status\":\"invalid_token\"}"), Ok(Some(vec![1])));
        assert_eq!(e.next(b""), Ok(None));
    }

    #[test]
    fn names_are_escaped_and_plain_is_one_message() {
        let s = scram(SaslMechanism::ScramSha256, "a=b,c", "p", "n");
        assert_eq!(s.first_bare(), "n=a=3Db=2Cc,r=n");
        let mut plain = Exchange::new(&SaslSettings {
            mechanism: SaslMechanism::Plain,
            username: "alice".into(),
            password: "secret".into(),
        });
        assert_eq!(plain.first(), b"\0alice\0secret");
        assert_eq!(plain.next(b""), Ok(None));
    }
}
