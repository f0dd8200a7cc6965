//! The open scheduler's clock, read once per tick rather than per arrival.
//!
//! At a million arrivals a second the scheduler wakes every 250 µs (the
//! arrival timer's gap) and finds hundreds of arrivals due, and read the
//! clock for each (28 ns a read here; `perf` put the reads at 6.7% of the
//! generator's samples, the CPU time measured side by side at about 1%:
//! bench/README). An arrival due before the last reading is due now,
//! whatever a new reading says. So the clock is read again only
//! when the next arrival is later than the last reading, after the
//! scheduler let other tasks run (time passed that it did not see), or
//! after `REUSES` arrivals in a row.
//!
//! What it changes: an arrival's `begin` and its recorded lateness may lag
//! the true time by the work of at most `REUSES` arrivals without a wait in
//! between (microseconds). Latency does not change: an open request's
//! latency runs from its intended start to its answer, and the answer is
//! timed when it comes. An arrival is still never started before it is due.

use std::time::Instant;

/// Arrivals that may share one reading of the clock.
const REUSES: u32 = 16;

pub(crate) struct TickClock {
    now: Instant,
    /// Arrivals served by `now`; `REUSES` forces a new reading.
    uses: u32,
}

impl TickClock {
    pub(crate) fn new() -> TickClock {
        TickClock {
            now: Instant::now(),
            uses: REUSES,
        }
    }

    /// The time to judge an arrival due at `due` by: the last reading when
    /// `due` had come by then and the reading is fresh, else a new one.
    pub(crate) fn for_arrival(&mut self, due: Instant) -> Instant {
        if due > self.now || self.uses >= REUSES {
            return self.read();
        }
        self.uses += 1;
        self.now
    }

    /// Reads the clock now.
    pub(crate) fn read(&mut self) -> Instant {
        self.now = Instant::now();
        self.uses = 1;
        self.now
    }

    /// Time passed that the scheduler did not see (it waited, or let other
    /// tasks run): the next arrival reads the clock.
    pub(crate) fn lapsed(&mut self) {
        self.uses = REUSES;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn arrivals_already_due_share_a_reading_up_to_its_reuses() {
        let mut clock = TickClock::new();
        let first = clock.read();
        let due = first - Duration::from_millis(1);
        let shared: Vec<Instant> = (1..REUSES).map(|_| clock.for_arrival(due)).collect();
        assert!(shared.iter().all(|&t| t == first));
        std::thread::sleep(Duration::from_millis(1));
        assert!(clock.for_arrival(due) > first, "read again after {REUSES}");
    }

    #[test]
    fn an_arrival_past_the_reading_or_a_lapse_reads_again() {
        let mut clock = TickClock::new();
        let first = clock.read();
        std::thread::sleep(Duration::from_millis(1));
        // Not due by the last reading: the clock must say whether it is now.
        let later = clock.for_arrival(first + Duration::from_micros(500));
        assert!(later >= first + Duration::from_millis(1));
        clock.lapsed();
        std::thread::sleep(Duration::from_millis(1));
        assert!(clock.for_arrival(first) >= later + Duration::from_millis(1));
    }
}
