//! Stands in for `autoperf tier web|db …` so the process launcher can be
//! tested without the CLI: `tier web|db --listen ADDR --workers N [--db ADDR] [--name-tag TAG]`.

use autoperf_testbed::{tier_main, Tier, TierArgs};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    anyhow::ensure!(
        args.next().as_deref() == Some("tier"),
        "usage: tier web|db --listen ADDR --workers N [--db ADDR]"
    );
    let tier = match args.next().as_deref() {
        Some("web") => Tier::Web,
        Some("db") => Tier::Db,
        other => anyhow::bail!("unknown tier {other:?}"),
    };
    let mut tier_args = TierArgs {
        tier,
        listen: "127.0.0.1:0".parse()?,
        workers: 2,
        db: None,
        name_tag: None,
        session_memory: 0,
        consume: None,
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--listen" => tier_args.listen = value.parse()?,
            "--workers" => tier_args.workers = value.parse()?,
            "--db" => tier_args.db = Some(value.parse()?),
            "--name-tag" => tier_args.name_tag = Some(value),
            "--session-memory" => tier_args.session_memory = value.parse()?,
            _ => anyhow::bail!("unknown flag {flag}"),
        }
    }
    tier_main(tier_args)
}
