//! The latest lag of each consumer group a run watches, for the live view:
//! written by the lag reader's thread each second, read at each tick.

use std::sync::{Arc, Mutex};

use crate::measure::thousands;

/// A cheap handle; clones share the readings.
#[derive(Debug, Clone, Default)]
pub struct LatestLag {
    groups: Arc<Vec<String>>,
    /// By group, in `groups`' order: the last lag read, in records, or
    /// `None` until one is (or when the last read failed).
    values: Arc<Mutex<Vec<Option<u64>>>>,
}

impl LatestLag {
    pub(crate) fn new(groups: Vec<String>) -> LatestLag {
        let values = vec![None; groups.len()];
        LatestLag {
            groups: Arc::new(groups),
            values: Arc::new(Mutex::new(values)),
        }
    }

    pub(crate) fn set(&self, group: usize, lag: Option<u64>) {
        if let Some(v) = self
            .values
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(group)
        {
            *v = lag;
        }
    }

    /// `lag my-app 1,234` for each group (`?` where its last read failed).
    pub fn text(&self) -> String {
        let values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        self.groups
            .iter()
            .zip(values.iter())
            .map(|(group, lag)| match lag {
                Some(lag) => format!("lag {group} {}", thousands(*lag)),
                None => format!("lag {group} ?"),
            })
            .collect::<Vec<_>>()
            .join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_group_shows_its_last_reading() {
        let latest = LatestLag::new(vec!["app".into(), "audit".into()]);
        assert_eq!(latest.text(), "lag app ? · lag audit ?");
        latest.clone().set(0, Some(1_234_567));
        latest.set(1, Some(0));
        assert_eq!(latest.text(), "lag app 1,234,567 · lag audit 0");
    }
}
