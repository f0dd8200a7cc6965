//! A round-robin TCP balancer on 127.0.0.1:0, as a Kubernetes Service is
//! to a deployment's replicas: each connection it accepts goes to the next
//! backend, bytes copied both ways, on a thread of its own for as long as
//! the test holds it.

use std::net::SocketAddr;

pub struct Balancer {
    pub addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

pub fn balancer(backends: Vec<SocketAddr>) -> Balancer {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let accept = async {
                for next in (0..backends.len()).cycle() {
                    let Ok((mut client, _)) = listener.accept().await else {
                        continue;
                    };
                    let backend = backends[next];
                    tokio::spawn(async move {
                        if let Ok(mut server) = tokio::net::TcpStream::connect(backend).await {
                            let _ = client.set_nodelay(true);
                            let _ = server.set_nodelay(true);
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        }
                    });
                }
            };
            tokio::select! {
                _ = accept => {}
                _ = stopped => {}
            }
        });
    });
    Balancer {
        addr: addr_rx.recv().unwrap(),
        _stop: stop,
    }
}
