#!/usr/bin/env bash
# The figures only a quiet machine shows (tests/it/quiet.rs): the testbed's
# CPU and lock bottlenecks analysed by `autoperf capacity`, and the open
# search on one web worker, held to the physical bands the CI tests
# asserted before they were derived from what each run measured. Run it on
# a machine with nothing else to do; record what it gives in
# bench/README.md ("Figures of a quiet machine").
#
#   bash bench/quiet.sh            # about 4 minutes on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --locked --test it -- --ignored --test-threads=1 quiet:: 2>&1 |
    grep -E '^test |^test result|panicked|max throughput|levels$|^[0-9.]+$'
