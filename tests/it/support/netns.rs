//! Several "hosts" on one machine: network namespaces joined by veth pairs
//! to a bridge in a switch namespace, with addresses of the benchmarking
//! range 198.18.0.0/15 (RFC 2544) inside them. Nothing they send leaves
//! the machine: the switch has no way out. Everything is removed on drop:
//! processes started in the hosts are killed first.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};

pub struct Hosts {
    switch: String,
    hosts: Vec<(String, String)>,
    /// Processes started in the hosts, by host name.
    children: Vec<(String, Child)>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("`ip` (iproute2) is needed for multi-host tests: {e}"));
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Hosts {
    /// Hosts named `names` (host i at 198.18.0.(i+1)), each in a namespace
    /// of its own, all on one bridge.
    pub fn new(tag: &str, names: &[&str]) -> Hosts {
        let prefix = format!("ap{}{tag}", std::process::id());
        let switch = format!("{prefix}-sw");
        let mut hosts = Hosts {
            switch: switch.clone(),
            hosts: Vec::new(),
            children: Vec::new(),
        };
        // A namespace left by a crashed run of the same pid and tag.
        let _ = Command::new("ip").args(["netns", "del", &switch]).output();
        ip(&["netns", "add", &switch]);
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &switch, "link", "set", "br0", "up"]);
        for (i, name) in names.iter().enumerate() {
            let ns = format!("{prefix}-{name}");
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
            ip(&["netns", "add", &ns]);
            hosts.hosts.push((name.to_string(), ns.clone()));
            let port = format!("p{i}");
            ip(&[
                "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", &port,
                "netns", &switch,
            ]);
            ip(&["-n", &switch, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &switch, "link", "set", &port, "up"]);
            let addr = format!("{}/24", Hosts::addr_of(i));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        hosts
    }

    fn addr_of(index: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 0, index as u8 + 1)
    }

    fn index(&self, host: &str) -> usize {
        self.hosts
            .iter()
            .position(|(n, _)| n == host)
            .unwrap_or_else(|| panic!("no host {host}"))
    }

    /// The host's address.
    pub fn addr(&self, host: &str) -> Ipv4Addr {
        Hosts::addr_of(self.index(host))
    }

    /// `--net=…`: nsenter enters the host's network namespace only (`ip
    /// netns exec` would also remount /sys, hiding the cgroups a test
    /// throttles a worker with, and the worker's view of its CPU quota).
    fn net(&self, host: &str) -> String {
        format!("--net=/var/run/netns/{}", self.namespace(host))
    }

    /// The host's namespace name.
    pub fn namespace(&self, host: &str) -> &str {
        &self.hosts[self.index(host)].1
    }

    /// `program args…` run inside `host`, its output piped; the hosts
    /// kill it when they go.
    pub fn spawn(&mut self, host: &str, program: &std::path::Path, args: &[&str]) -> &mut Child {
        let child = Command::new("nsenter")
            .arg(self.net(host))
            .arg(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nsenter starts");
        self.children.push((host.to_string(), child));
        &mut self.children.last_mut().unwrap().1
    }

    /// The process first started in `host` (nsenter execs the program, so
    /// it is the program's).
    pub fn pid(&self, host: &str) -> u32 {
        self.first(host).id()
    }

    fn first(&self, host: &str) -> &Child {
        self.children
            .iter()
            .find(|(h, _)| h == host)
            .map(|(_, c)| c)
            .unwrap_or_else(|| panic!("nothing started in {host}"))
    }

    /// Waits up to `timeout` for the process first started in `host` to
    /// end (killing it after) and returns its exit code.
    pub fn wait(&mut self, host: &str, timeout: std::time::Duration) -> Option<i32> {
        let child = self
            .children
            .iter_mut()
            .find(|(h, _)| h == host)
            .map(|(_, c)| c)
            .unwrap_or_else(|| panic!("nothing started in {host}"));
        let give_up = std::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            if std::time::Instant::now() >= give_up {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the process in {host} did not end within {timeout:?}");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// `program args…` run inside `host` to its end: (exit code, stdout, stderr).
    pub fn run(
        &self,
        host: &str,
        program: &std::path::Path,
        args: &[&str],
    ) -> (Option<i32>, String, String) {
        let out = Command::new("nsenter")
            .arg(self.net(host))
            .arg(program)
            .args(args)
            .output()
            .expect("nsenter runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs `f` on a thread inside `host`'s network namespace: sockets it
    /// binds there stay there (a server for the test to count with).
    pub fn enter<T: Send + 'static>(
        &self,
        host: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let path = format!("/var/run/netns/{}", self.namespace(host));
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns on this thread only, with a namespace file we
            // hold open.
            let rc =
                unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for (_, ns) in &self.hosts {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.switch])
            .output();
    }
}
