//! The indices that name a scenario's parts once it is validated: a
//! request, a feeder (a `data:` entry), a per-user variable. They sit apart
//! from the model so templates and the session graph can name them without
//! importing the model that holds templates and graphs.

/// Index of a request in `Scenario::requests`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct RequestId(pub u32);

/// Index of a feeder (a `data:` entry) in `Scenario::feeders`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FeederId(pub u32);

/// Index of a per-user variable (a name bound by some `extract`) in
/// `Scenario::variables`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VarId(pub u32);

impl RequestId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}
impl FeederId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}
impl VarId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}
