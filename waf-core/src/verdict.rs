//! What the engine tells the host after each phase.

/// The answer to one phase of a transaction.
#[must_use = "a verdict that is not acted upon lets a blocked request through"]
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Go on with the transaction.
    Continue,
    /// Stop the transaction and answer as the intervention says.
    Intervene(Intervention),
}

impl Verdict {
    /// The intervention, if the verdict is one.
    pub fn intervention(&self) -> Option<&Intervention> {
        match self {
            Verdict::Intervene(i) => Some(i),
            Verdict::Continue => None,
        }
    }
}

/// A disruptive decision: which status to answer with, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intervention {
    /// The HTTP status to answer with (403 unless the rule says `status:N`).
    pub status: u16,
    /// What to do with the connection.
    pub action: DisruptiveAction,
    /// The id of the rule that decided, 0 for engine limits (body too large).
    pub rule_id: u64,
    /// The rule's expanded `msg`, if any.
    pub message: Option<String>,
}

/// How an intervention ends the transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisruptiveAction {
    /// Answer with the status (`deny`, `block` with a blocking default action).
    Deny,
    /// Close the connection without an answer (`drop`).
    Drop,
    /// Answer with a redirect to this URL (`redirect:URL`).
    Redirect(String),
}
