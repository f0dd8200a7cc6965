//! Tiers selected by cgroup, as containers are: the testbed's tiers moved
//! into cgroups of their own (in every hierarchy this host mounts: the CI
//! machine has v1's cpuacct, memory and blkio and an empty v2), measured
//! by a glob beside the same processes measured by name, in one run.

use crate::support;

use autoperf_agent::cgroups::Hierarchies;
use std::path::PathBuf;

/// Cgroups made for a test, one per name under `autoperf-test-PID-TAG` in
/// every hierarchy mounted; removed (after their processes are gone) when
/// dropped.
struct Cgroups {
    made: Vec<PathBuf>,
    parents: Vec<PathBuf>,
}

impl Cgroups {
    fn make(tag: &str, names: &[&str]) -> Cgroups {
        let h = Hierarchies::system();
        Cgroups::make_in(tag, names, [h.v2, h.cpuacct, h.memory, h.blkio])
    }

    /// Made everywhere but in v1's memory hierarchy. Under v2 the parent
    /// made here enables no controller for its children (its
    /// `cgroup.subtree_control` starts empty), so they lack memory too.
    fn make_without_memory(tag: &str, names: &[&str]) -> Cgroups {
        let h = Hierarchies::system();
        Cgroups::make_in(tag, names, [h.v2, h.cpuacct, None, h.blkio])
    }

    fn make_in(tag: &str, names: &[&str], roots: [Option<PathBuf>; 4]) -> Cgroups {
        let roots: Vec<PathBuf> = roots.into_iter().flatten().collect();
        assert!(
            !roots.is_empty(),
            "this host mounts no cgroup hierarchy: the test needs one (a container without /sys/fs/cgroup?)"
        );
        let parent = format!("autoperf-test-{}-{tag}", std::process::id());
        let mut made = Vec::new();
        let mut parents = Vec::new();
        for root in roots {
            parents.push(root.join(&parent));
            for name in names {
                let dir = root.join(&parent).join(name);
                std::fs::create_dir_all(&dir).unwrap_or_else(|e| {
                    panic!(
                        "cannot make cgroup {}: {e} (the tests run as root)",
                        dir.display()
                    )
                });
                made.push(dir);
            }
        }
        Cgroups { made, parents }
    }

    /// Moves process `pid` (all its threads) into cgroup `name`.
    fn enter(&self, name: &str, pid: u32) {
        for dir in self.made.iter().filter(|d| d.ends_with(name)) {
            std::fs::write(dir.join("cgroup.procs"), pid.to_string())
                .unwrap_or_else(|e| panic!("cannot move {pid} into {}: {e}", dir.display()));
        }
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        for dir in self.made.iter().chain(&self.parents) {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[test]
fn a_tier_measured_by_its_cgroup_costs_what_its_processes_cost() {
    let tag = "cg";
    let cgroups = Cgroups::make(tag, &["web", "db"]);
    let tb = support::testbed(2);
    cgroups.enter("web", tb.web_pid);
    cgroups.enter("db", tb.db_pid);
    let agent = support::agent();
    let dir = support::scratch_dir("cgroups");
    let parent = format!("autoperf-test-{}-{tag}", std::process::id());
    let scenario = dir.join("s.yaml");
    std::fs::write(
        &scenario,
        format!(
            r#"
name: cgroups
target: {{base_url: "{}"}}
think_time: 10ms
requests:
  db: {{path: "/db?web_ms=2&db_ms=1"}}
servers:
  - {{tier: web, agent: "{a}", processes: [{web}]}}
  - {{tier: web-cgroup, agent: "{a}", cgroup: "{parent}/web"}}
  - {{tier: db-cgroup, agent: "{a}", cgroup: "/{parent}/d*/"}}
"#,
            tb.web_url,
            a = agent.url(),
            web = tb.web_process,
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        scenario.to_str().unwrap(),
        "--users",
        "4",
        "--duration",
        "5s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let level = &support::run_json(&out)["levels"][0];
    let servers = &level["servers"];
    let cost = |tier: &str| -> f64 {
        servers[tier]["cpu_ms_per_request"]
            .as_object()
            .unwrap_or_else(|| panic!("{tier} not measured: {servers}"))
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum()
    };
    // The same process, by name (10 ms ticks) and by cgroup (µs or ns).
    let (by_name, by_cgroup) = (cost("web"), cost("web-cgroup"));
    assert!(
        (by_cgroup - by_name).abs() <= 0.05 * by_name,
        "web: {by_name} ms by name, {by_cgroup} ms by cgroup\n{servers}"
    );
    // The db tier's 1 ms, found by a glob with slashes around it.
    let db = cost("db-cgroup");
    assert!((0.8..1.6).contains(&db), "db {db} ms\n{servers}");
    // Memory from the hierarchy that has it (v1 memory here, v2 where it
    // is enabled). A cgroup is charged for the pages its processes touch
    // while in it (a container's start inside it; these were moved in, and
    // since Linux 6.0 v1 no longer moves charges along), so: some, and not
    // more than the process holds by far.
    let memory = servers["web-cgroup"]["memory_max_bytes"].as_u64().unwrap();
    let rss = servers["web"]["memory_max_bytes"].as_u64().unwrap();
    if Hierarchies::system().memory.is_some() {
        assert!(memory > 0 && memory < 4 * rss + (16 << 20), "{servers}");
        // And by kind, from memory.stat: no more than the whole.
        let anon = servers["web-cgroup"]["memory_anon_mean_bytes"].as_u64();
        let file = servers["web-cgroup"]["memory_file_mean_bytes"].as_u64();
        let mean = servers["web-cgroup"]["memory_mean_bytes"].as_u64().unwrap();
        assert!(
            anon.zip(file)
                .is_some_and(|(a, f)| a + f <= mean + (1 << 20)),
            "{servers}"
        );
    }
    assert_eq!(servers["web-cgroup"]["replicas"], 1, "{servers}");
    assert!(servers["web"].get("replicas").is_none(), "{servers}");
    // Its figure goes by the glob, as a process's by its name.
    assert!(
        servers["web-cgroup"]["cpu_ms_per_request"]
            .get(format!("{parent}/web"))
            .is_some(),
        "{servers}"
    );
    drop(tb);
}

/// Three replicas of the web tier behind a round-robin balancer, as a
/// deployment behind its Service, each in a cgroup of its own: one glob
/// measures them together, at what their three processes cost by name,
/// and says there were three.
#[test]
fn three_replicas_matched_by_one_glob_cost_what_their_processes_cost() {
    let tag = "replicas";
    let cgroups = Cgroups::make(tag, &["web-1", "web-2", "web-3"]);
    let replicas: Vec<autoperf_testbed::Testbed> = (0..3).map(|_| support::testbed(1)).collect();
    for (i, tb) in replicas.iter().enumerate() {
        cgroups.enter(&format!("web-{}", i + 1), tb.web_pid);
    }
    let service = support::balancer::balancer(replicas.iter().map(|tb| tb.web_addr).collect());
    let agent = support::agent();
    let dir = support::scratch_dir("cgroups-replicas");
    let parent = format!("autoperf-test-{}-{tag}", std::process::id());
    let names: Vec<&str> = replicas.iter().map(|tb| tb.web_process.as_str()).collect();
    let scenario = dir.join("s.yaml");
    std::fs::write(
        &scenario,
        format!(
            r#"
name: replicas
target: {{base_url: "http://{}"}}
think_time: 10ms
requests:
  cpu: {{path: "/cpu?ms=2"}}
servers:
  - {{tier: by-name, agent: "{a}", processes: [{}]}}
  - {{tier: by-glob, agent: "{a}", cgroup: "{parent}/web-*"}}
"#,
            service.addr,
            names.join(", "),
            a = agent.url(),
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        scenario.to_str().unwrap(),
        "--users",
        "6",
        "--duration",
        "5s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let servers = &support::run_json(&out)["levels"][0]["servers"];
    let cost = |tier: &str| -> f64 {
        servers[tier]["cpu_ms_per_request"]
            .as_object()
            .unwrap_or_else(|| panic!("{tier} not measured: {servers}"))
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum()
    };
    let (by_name, by_glob) = (cost("by-name"), cost("by-glob"));
    eprintln!("three replicas: {by_glob} ms a request by glob, {by_name} ms by name");
    assert!(
        by_name > 1.5 && (by_glob - by_name).abs() <= 0.05 * by_name,
        "{by_glob} ms by glob, {by_name} ms by their names\n{servers}"
    );
    assert_eq!(servers["by-glob"]["replicas"], 3, "{servers}");
    // Each replica served its share: every one burned CPU.
    let per_process = servers["by-name"]["cpu_util_cores_per_process"]
        .as_object()
        .unwrap();
    assert!(
        names
            .iter()
            .all(|n| per_process[*n].as_f64().unwrap() > 0.0),
        "{servers}"
    );
    drop(replicas);
}

#[test]
fn a_glob_that_matches_no_cgroup_stops_the_run_at_its_start_naming_the_nearest() {
    let tag = "none";
    let _cgroups = Cgroups::make(tag, &["api-1", "api-2"]);
    let tb = support::testbed(1);
    let agent = support::agent();
    let dir = support::scratch_dir("cgroups-none");
    let parent = format!("autoperf-test-{}-{tag}", std::process::id());
    let scenario = dir.join("s.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: x\ntarget: {{base_url: \"{}\"}}\nrequests:\n  a: {{path: /health}}\nservers:\n  - {{tier: web, agent: \"{}\", cgroup: \"{parent}/web-*\"}}\n",
            tb.web_url,
            agent.url()
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        scenario.to_str().unwrap(),
        "--users",
        "1",
        "--duration",
        "1s",
        "--out",
        dir.join("out").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("tier web: no cgroup matches `{parent}/web-*`"))
            && stderr.contains(&format!("nearest there: {parent}/api-1, {parent}/api-2")),
        "{stderr}"
    );
}

/// A host whose hierarchies lack the memory controller for the tier's
/// cgroup: the run says so before its first level, measures the CPU all
/// the same, and a memory threshold fails as not measured, never passing
/// on the 0 it reads.
#[test]
fn a_cgroup_without_the_memory_controller_is_named_and_its_cpu_measured() {
    let tag = "nomem";
    let cgroups = Cgroups::make_without_memory(tag, &["web"]);
    let tb = support::testbed(2);
    cgroups.enter("web", tb.web_pid);
    let agent = support::agent();
    let dir = support::scratch_dir("cgroups-nomem");
    let parent = format!("autoperf-test-{}-{tag}", std::process::id());
    let scenario = dir.join("s.yaml");
    std::fs::write(
        &scenario,
        format!(
            r#"
name: no-memory-controller
target: {{base_url: "{}"}}
think_time: 10ms
requests:
  cpu: {{path: "/cpu?ms=2"}}
servers:
  - {{tier: web, agent: "{a}", cgroup: "{parent}/web"}}
thresholds: ["web.memory < 64GiB", "web.cpu_ms < 1000"]
"#,
            tb.web_url,
            a = agent.url(),
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = support::autoperf(&[
        "run",
        scenario.to_str().unwrap(),
        "--users",
        "2",
        "--duration",
        "3s",
        "--warmup",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    // The memory threshold fails: nothing measured it.
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let run = support::run_json(&out);
    let warned = run["warnings"].to_string();
    assert!(
        warned.contains("tier web: the cgroups of")
            && warned.contains("have no memory controller")
            && warned.contains("+memory"),
        "{warned}"
    );
    assert!(stderr.contains("no memory controller"), "{stderr}");
    let web = &run["levels"][0]["servers"]["web"];
    assert_eq!(web["unmeasured"][0], "memory", "{web}");
    // The rest is measured: the 2 ms burned per request, and more.
    let cpu_ms: f64 = web["cpu_ms_per_request"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!(cpu_ms >= 1.5, "{web}");
    let results = run["analysis"]["thresholds"].as_array().unwrap();
    assert_eq!(results[0]["passed"], false, "{results:?}");
    assert!(
        results[0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("no memory controller")),
        "{results:?}"
    );
    assert_eq!(results[1]["passed"], true, "{results:?}");
    drop(tb);
}

/// A container has a network of its own. The web tier runs in a host of
/// its own (a network namespace, as a pod has), in a cgroup; the agent and
/// the load run in another. The tier selected by cgroup counts the bytes
/// through its own namespace — the responses it sends — while a tier
/// selected by name counts the agent's host, which receives them.
#[test]
fn a_tier_in_its_own_network_namespace_counts_its_own_bytes() {
    let tag = "net";
    let cgroups = Cgroups::make(tag, &["web"]);
    let mut hosts = support::netns::Hosts::new("cgn", &["client", "server"]);
    let listen = std::net::SocketAddr::from((hosts.addr("server"), 8080));
    // The testbed's tiers die with the thread that started them (their
    // parent-death signal): it lives inside the server's namespace until
    // the test is done.
    let (started, testbed) = std::sync::mpsc::channel();
    let (done, end) = std::sync::mpsc::channel::<()>();
    let server = hosts.enter("server", move || {
        let tb = support::testbed_with(autoperf_testbed::TestbedOptions {
            listen,
            web_workers: 1,
            ..Default::default()
        });
        started
            .send((tb.web_url.clone(), tb.web_pid, tb.web_process.clone()))
            .unwrap();
        let _ = end.recv();
        drop(tb);
    });
    let (web_url, web_pid, web_process) = testbed.recv().unwrap();
    cgroups.enter("web", web_pid);
    let exe = support::autoperf_exe();
    let agent = hosts.spawn("client", &exe, &["agent", "--listen", "127.0.0.1:0"]);
    let agent_url = support::printed_url(agent.stdout.take().unwrap());
    let dir = support::scratch_dir("cgroups-net");
    let parent = format!("autoperf-test-{}-{tag}", std::process::id());
    let scenario = dir.join("s.yaml");
    std::fs::write(
        &scenario,
        format!(
            r#"
name: cgroup-network
target: {{base_url: "{}"}}
think_time: 20ms
requests:
  body: {{path: "/bytes?n=20000"}}
servers:
  - {{tier: by-name, agent: "{agent_url}", processes: [{web}]}}
  - {{tier: by-cgroup, agent: "{agent_url}", cgroup: "{parent}/web"}}
"#,
            web_url,
            web = web_process,
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = hosts.run(
        "client",
        &exe,
        &[
            "run",
            scenario.to_str().unwrap(),
            "--users",
            "2",
            "--duration",
            "4s",
            "--warmup",
            "1s",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let servers = &support::run_json(&out)["levels"][0]["servers"];
    let net = |tier: &str, way: &str| {
        servers[tier]["net_bytes_per_request"][way]
            .as_f64()
            .unwrap_or_else(|| panic!("{tier} {way}: {servers}"))
    };
    // 20,000 bytes of body, plus headers and the TCP/IP framing of some
    // fifteen segments; the other way, the request and its ACKs.
    let body = 20_000.0;
    let (sent, received) = (net("by-cgroup", "tx"), net("by-cgroup", "rx"));
    assert!(
        (body..1.3 * body).contains(&sent) && received < 0.25 * body,
        "the web tier's namespace sent {sent} and received {received} bytes a request\n{servers}"
    );
    let (host_rx, host_tx) = (net("by-name", "rx"), net("by-name", "tx"));
    assert!(
        (body..1.3 * body).contains(&host_rx) && host_tx < 0.25 * body,
        "the agent's host received {host_rx} and sent {host_tx} bytes a request\n{servers}"
    );
    drop(done);
    server.join().unwrap();
}
