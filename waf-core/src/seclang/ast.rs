//! The SecLang syntax tree: what a rule file says, with where it says it.
//!
//! The parser only splits text into directives, variables, operators and actions and keeps
//! each piece's [`Span`]; names are kept as written and checked by [`crate::compile`], so
//! that a compile error can still point at the exact place in the file.

use std::sync::Arc;

/// A position in a rule file: file name, 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    /// The file name, or the name given to inline text.
    pub file: Arc<str>,
    /// 1-based line number.
    pub line: u32,
    /// 1-based column (in bytes) on that line.
    pub column: u32,
}

/// One directive with the place it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Directive {
    /// Where the directive name starts.
    pub span: Span,
    /// What it says.
    pub kind: DirectiveKind,
    /// A load warning about how the directive was read (an action list missing its
    /// closing quote), if any.
    pub note: Option<String>,
}

/// The directives the parser knows the shape of; every other `Sec*` directive is a
/// [`DirectiveKind::Setting`] and the compiler decides whether it is supported.
#[derive(Clone, Debug, PartialEq)]
pub enum DirectiveKind {
    /// `SecRule VARIABLES "OPERATOR" "ACTIONS"`. A rule with the `chain` action is followed by
    /// its chained rule as the next `Rule` directive; the compiler links them.
    Rule(RuleAst),
    /// `SecAction "ACTIONS"`.
    Action(Vec<ActionAst>),
    /// `SecMarker NAME` (quotes removed).
    Marker(String),
    /// `SecDefaultAction "ACTIONS"`.
    DefaultAction(Vec<ActionAst>),
    /// `SecRuleRemoveById 1 2 100-200`.
    RemoveById(Vec<IdRange>),
    /// `SecRuleRemoveByTag TAG` (the argument is a regular expression in ModSecurity 2 and a
    /// plain string in libmodsecurity 3; kept as written).
    RemoveByTag(String),
    /// `SecRuleRemoveByMsg MSG`.
    RemoveByMsg(String),
    /// `SecRuleUpdateTargetById ID[,ID..] "TARGETS" ["REPLACED"]`.
    UpdateTargetById {
        /// The rule ids or ranges.
        ids: Vec<IdRange>,
        /// Targets to add (or, with `!`, to exclude).
        targets: Vec<VariableAst>,
        /// The optional third argument: the target that the new ones replace.
        replaced: Option<Vec<VariableAst>>,
    },
    /// `SecRuleUpdateTargetByTag TAG "TARGETS" ["REPLACED"]`.
    UpdateTargetByTag {
        /// The tag.
        tag: String,
        /// Targets to add (or, with `!`, to exclude).
        targets: Vec<VariableAst>,
        /// The optional third argument.
        replaced: Option<Vec<VariableAst>>,
    },
    /// `SecRuleUpdateTargetByMsg MSG "TARGETS" ["REPLACED"]`.
    UpdateTargetByMsg {
        /// The message.
        msg: String,
        /// Targets to add (or, with `!`, to exclude).
        targets: Vec<VariableAst>,
        /// The optional third argument.
        replaced: Option<Vec<VariableAst>>,
    },
    /// `SecRuleUpdateActionById ID[:CHAIN_INDEX] "ACTIONS"`.
    UpdateActionById {
        /// The rule id.
        id: u64,
        /// The actions that replace or extend the rule's.
        actions: Vec<ActionAst>,
    },
    /// Any other directive, with its arguments split on whitespace and unquoted
    /// (for example `SecRuleEngine On`, `SecResponseBodyMimeType text/plain text/html`).
    /// The name is kept as written; the compiler matches it case-insensitively.
    Setting {
        /// Directive name as written, e.g. `SecRequestBodyLimit`.
        name: String,
        /// Arguments, quotes removed.
        args: Vec<String>,
    },
}

/// An inclusive range of rule ids (`5` is `5-5`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRange {
    /// First id in the range.
    pub start: u64,
    /// Last id in the range (inclusive).
    pub end: u64,
}

/// `SecRule` parts.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleAst {
    /// The targets, in the order written.
    pub variables: Vec<VariableAst>,
    /// The operator.
    pub operator: OperatorAst,
    /// The actions (empty when the rule has no action string).
    pub actions: Vec<ActionAst>,
}

/// One target: `ARGS`, `!ARGS:foo`, `&TX:score`, `REQUEST_COOKIES:/^_ga/`.
#[derive(Clone, Debug, PartialEq)]
pub struct VariableAst {
    /// Where the target starts.
    pub span: Span,
    /// `!`: remove this key from the rule's targets.
    pub exclusion: bool,
    /// `&`: the number of values instead of the values.
    pub count: bool,
    /// Variable name as written (`ARGS`, `request_headers`).
    pub name: String,
    /// The part after `:`, if any.
    pub selector: Option<SelectorAst>,
}

/// The key part of a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectorAst {
    /// A plain key (`User-Agent`), quotes removed. XPath selectors such as `XML:/*` are keys too.
    Key(String),
    /// A regular expression between slashes (`/^_ga/`), slashes removed.
    Regex(String),
}

/// The operator: `@rx pattern`, `!@eq 0`, or a bare pattern (an implicit `@rx`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorAst {
    /// Where the operator string starts.
    pub span: Span,
    /// `!@op`.
    pub negated: bool,
    /// Operator name without `@`, as written (`rx` for a bare pattern).
    pub name: String,
    /// Everything after the name, with `\"` unescaped and surrounding whitespace trimmed
    /// (as Coraza does; `"@pm  a b "` has the argument `a b`).
    pub argument: String,
}

/// One action: `deny`, `id:942100`, `msg:'SQL Injection'`, `t:lowercase`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionAst {
    /// Where the action name starts.
    pub span: Span,
    /// Action name as written.
    pub name: String,
    /// The value after `:`, with surrounding single quotes removed.
    pub value: Option<String>,
}
