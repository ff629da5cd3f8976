//! libinjection's word lists and the matching rules that go with them: dangerous tags,
//! dangerous attributes (event handlers, URL-valued, style, indirect), dangerous URL schemes
//! after entity decoding, and the comment tricks.
//!
//! The lists are libinjection's (`libinjection_xss.c`); the matching rules copy its C
//! helpers exactly, because the verdicts depend on them:
//!
//! - `cstrcasecmp_with_null` ignores NUL bytes in the input but still counts them against
//!   the length, and upper-cases only `a`-`z` (bytes >= 0x80 never match);
//! - `htmlencode_startswith` decodes `&#..;`/`&#x..;` entities, skips leading bytes <= 0x20,
//!   NULs and `\n` anywhere, and compares the low byte of the decoded code point.
//!
//! Nothing here allocates: names are upper-cased into small stack buffers.

/// What an attribute name means for the value that follows it (C's `attribute_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttrKind {
    /// Harmless.
    None,
    /// Any value is XSS (event handlers, `xmlns`, `xlink*`, IE data binding).
    Black,
    /// The value is a URL: XSS when its scheme is dangerous.
    Url,
    /// The value is CSS: always XSS.
    Style,
    /// The value names another attribute (SVG `attributeName`): XSS when that name is
    /// itself dangerous.
    Indirect,
}

/// Which rule decides that an `on*` attribute name is an event handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventRule {
    /// libinjection 4.x: `on` followed by a known event name (as a prefix: `onloadx` counts).
    Listed,
    /// libinjection 3.9.2: every name of 5 bytes or more that starts with `on`.
    AnyOn,
}

/// Tags that are XSS whatever their attributes, upper-cased with NULs dropped.
fn is_black_tag_word(word: &[u8]) -> bool {
    matches!(
        word,
        b"APPLET"
            | b"BASE"
            | b"COMMENT" // IE, html5sec.org #38
            | b"EMBED"
            | b"FRAME"
            | b"FRAMESET"
            | b"HANDLER" // Opera SVG, effectively a script tag
            | b"IFRAME"
            | b"IMPORT"
            | b"ISINDEX"
            | b"LINK"
            | b"LISTENER"
            | b"META"
            | b"NOSCRIPT"
            | b"OBJECT"
            | b"SCRIPT"
            | b"STYLE"
            | b"VMLFRAME"
            | b"XML"
            | b"XSS"
    )
}

/// Longest word of [`is_black_tag_word`].
const BLACK_TAG_MAX: usize = 8;

/// What an attribute name, upper-cased with NULs dropped, makes of its value.
fn black_attr_word(word: &[u8]) -> AttrKind {
    match word {
        b"ACTION" // form
        | b"BACKGROUND" // IE6, O11
        | b"BY" // SVG
        | b"DYNSRC" // obsolete img attribute
        | b"FOLDER" // IE, a tags only
        | b"FORMACTION" // HTML5
        | b"FROM" // SVG
        | b"HANDLER" // SVG Tiny, Opera
        | b"HREF"
        | b"LOWSRC" // obsolete img attribute
        | b"POSTER" // Opera 10, 11
        | b"SRC"
        | b"TO" // SVG
        | b"VALUES" // SVG
        | b"XLINK:HREF" => AttrKind::Url,
        b"ATTRIBUTENAME" => AttrKind::Indirect, // SVG animation names the attribute
        b"DATAFORMATAS" | b"DATASRC" => AttrKind::Black, // IE data binding
        b"FILTER" | b"STYLE" => AttrKind::Style, // FILTER: Opera, SVG inline style
        _ => AttrKind::None,
    }
}

/// Longest word of [`black_attr_word`].
const BLACK_ATTR_MAX: usize = 13;

/// Event names after `on`, sorted (libinjection 4.x, from WebKit's `EventNames.h`). A name
/// matches when one of these is a prefix of the rest of the attribute name.
const EVENTS: &[&[u8]] = &[
    b"ABORT",
    b"ACTIVATE",
    b"ACTIVE",
    b"ADDSOURCEBUFFER",
    b"ADDSTREAM",
    b"ADDTRACK",
    b"AFTERPRINT",
    b"ANIMATIONCANCEL",
    b"ANIMATIONEND",
    b"ANIMATIONITERATION",
    b"ANIMATIONSTART",
    b"AUDIOEND",
    b"AUDIOPROCESS",
    b"AUDIOSTART",
    b"AUTOCOMPLETE",
    b"AUTOCOMPLETEERROR",
    b"BEFOREACTIVATE",
    b"BEFORECOPY",
    b"BEFORECUT",
    b"BEFOREINPUT",
    b"BEFORELOAD",
    b"BEFOREPASTE",
    b"BEFOREPRINT",
    b"BEFOREUNLOAD",
    b"BEGINEVENT",
    b"BLOCKED",
    b"BLUR",
    b"BOUNDARY",
    b"BUFFEREDAMOUNTLOW",
    b"CACHED",
    b"CANCEL",
    b"CANPLAY",
    b"CANPLAYTHROUGH",
    b"CHANGE",
    b"CHARGINGCHANGE",
    b"CHARGINGTIMECHANGE",
    b"CHECKING",
    b"CLICK",
    b"CLOSE",
    b"COMPLETE",
    b"COMPOSITIONEND",
    b"COMPOSITIONSTART",
    b"COMPOSITIONUPDATE",
    b"CONNECT",
    b"CONNECTING",
    b"CONNECTIONSTATECHANGE",
    b"CONTEXTMENU",
    b"CONTROLLERCHANGE",
    b"COPY",
    b"CUECHANGE",
    b"CUT",
    b"DATAAVAILABLE",
    b"DATACHANNEL",
    b"DBLCLICK",
    b"DEVICECHANGE",
    b"DEVICEMOTION",
    b"DEVICEORIENTATION",
    b"DISCHARGINGTIMECHANGE",
    b"DISCONNECT",
    b"DOMACTIVATE",
    b"DOMCHARACTERDATAMODIFIED",
    b"DOMCONTENTLOADED",
    b"DOMFOCUSIN",
    b"DOMFOCUSOUT",
    b"DOMNODEINSERTED",
    b"DOMNODEINSERTEDINTODOCUMENT",
    b"DOMNODEREMOVED",
    b"DOMNODEREMOVEDFROMDOCUMENT",
    b"DOMSUBTREEMODIFIED",
    b"DOWNLOADING",
    b"DRAG",
    b"DRAGEND",
    b"DRAGENTER",
    b"DRAGLEAVE",
    b"DRAGOVER",
    b"DRAGSTART",
    b"DROP",
    b"DURATIONCHANGE",
    b"EMPTIED",
    b"ENCRYPTED",
    b"END",
    b"ENDED",
    b"ENDEVENT",
    b"ENTER",
    b"ENTERPICTUREINPICTURE",
    b"ERROR",
    b"EXIT",
    b"FETCH",
    b"FINISH",
    b"FOCUS",
    b"FOCUSIN",
    b"FOCUSOUT",
    b"FORMCHANGE",
    b"FORMINPUT",
    b"GAMEPADCONNECTED",
    b"GAMEPADDISCONNECTED",
    b"GESTURECHANGE",
    b"GESTUREEND",
    b"GESTURESCROLLEND",
    b"GESTURESCROLLSTART",
    b"GESTURESCROLLUPDATE",
    b"GESTURESTART",
    b"GESTURETAP",
    b"GESTURETAPDOWN",
    b"GOTPOINTERCAPTURE",
    b"HASHCHANGE",
    b"ICECANDIDATE",
    b"ICECANDIDATEERROR",
    b"ICECONNECTIONSTATECHANGE",
    b"ICEGATHERINGSTATECHANGE",
    b"INACTIVE",
    b"INPUT",
    b"INPUTSOURCESCHANGE",
    b"INSTALL",
    b"INVALID",
    b"KEYDOWN",
    b"KEYPRESS",
    b"KEYSTATUSESCHANGE",
    b"KEYUP",
    b"LANGUAGECHANGE",
    b"LEAVEPICTUREINPICTURE",
    b"LEVELCHANGE",
    b"LOAD",
    b"LOADEDDATA",
    b"LOADEDMETADATA",
    b"LOADEND",
    b"LOADING",
    b"LOADINGDONE",
    b"LOADINGERROR",
    b"LOADSTART",
    b"LOSTPOINTERCAPTURE",
    b"MARK",
    b"MERCHANTVALIDATION",
    b"MESSAGE",
    b"MESSAGEERROR",
    b"MOUSEDOWN",
    b"MOUSEENTER",
    b"MOUSELEAVE",
    b"MOUSEMOVE",
    b"MOUSEOUT",
    b"MOUSEOVER",
    b"MOUSEUP",
    b"MOUSEWHEEL",
    b"MUTE",
    b"NEGOTIATIONNEEDED",
    b"NEXTTRACK",
    b"NOMATCH",
    b"NOUPDATE",
    b"OBSOLETE",
    b"OFFLINE",
    b"ONLINE",
    b"OPEN",
    b"ORIENTATIONCHANGE",
    b"OVERCONSTRAINED",
    b"OVERFLOWCHANGED",
    b"PAGEHIDE",
    b"PAGESHOW",
    b"PASTE",
    b"PAUSE",
    b"PAYERDETAILCHANGE",
    b"PAYMENTAUTHORIZED",
    b"PAYMENTMETHODCHANGE",
    b"PAYMENTMETHODSELECTED",
    b"PLAY",
    b"PLAYING",
    b"POINTERCANCEL",
    b"POINTERDOWN",
    b"POINTERENTER",
    b"POINTERLEAVE",
    b"POINTERLOCKCHANGE",
    b"POINTERLOCKERROR",
    b"POINTERMOVE",
    b"POINTEROUT",
    b"POINTEROVER",
    b"POINTERUP",
    b"POPSTATE",
    b"PREVIOUSTRACK",
    b"PROCESSORERROR",
    b"PROGRESS",
    b"PROPERTYCHANGE",
    b"RATECHANGE",
    b"READYSTATECHANGE",
    b"REJECTIONHANDLED",
    b"REMOVE",
    b"REMOVESOURCEBUFFER",
    b"REMOVESTREAM",
    b"REMOVETRACK",
    b"RESET",
    b"RESIZE",
    b"RESOURCETIMINGBUFFERFULL",
    b"RESULT",
    b"RESUME",
    b"SCROLL",
    b"SEARCH",
    b"SECURITYPOLICYVIOLATION",
    b"SEEKED",
    b"SEEKING",
    b"SELECT",
    b"SELECTEND",
    b"SELECTIONCHANGE",
    b"SELECTSTART",
    b"SHIPPINGADDRESSCHANGE",
    b"SHIPPINGCONTACTSELECTED",
    b"SHIPPINGMETHODSELECTED",
    b"SHIPPINGOPTIONCHANGE",
    b"SHOW",
    b"SIGNALINGSTATECHANGE",
    b"SLOTCHANGE",
    b"SOUNDEND",
    b"SOUNDSTART",
    b"SOURCECLOSE",
    b"SOURCEENDED",
    b"SOURCEOPEN",
    b"SPEECHEND",
    b"SPEECHSTART",
    b"SQUEEZE",
    b"SQUEEZEEND",
    b"SQUEEZESTART",
    b"STALLED",
    b"START",
    b"STARTED",
    b"STATECHANGE",
    b"STOP",
    b"STORAGE",
    b"SUBMIT",
    b"SUCCESS",
    b"SUSPEND",
    b"TEXTINPUT",
    b"TIMEOUT",
    b"TIMEUPDATE",
    b"TOGGLE",
    b"TONECHANGE",
    b"TOUCHCANCEL",
    b"TOUCHEND",
    b"TOUCHFORCECHANGE",
    b"TOUCHMOVE",
    b"TOUCHSTART",
    b"TRACK",
    b"TRANSITIONCANCEL",
    b"TRANSITIONEND",
    b"TRANSITIONRUN",
    b"TRANSITIONSTART",
    b"UNCAPTUREDERROR",
    b"UNHANDLEDREJECTION",
    b"UNLOAD",
    b"UNMUTE",
    b"UPDATE",
    b"UPDATEEND",
    b"UPDATEFOUND",
    b"UPDATEREADY",
    b"UPDATESTART",
    b"UPGRADENEEDED",
    b"VALIDATEMERCHANT",
    b"VERSIONCHANGE",
    b"VISIBILITYCHANGE",
    b"VOLUMECHANGE",
    b"WAITING",
    b"WAITINGFORKEY",
    b"WEBGLCONTEXTCHANGED",
    b"WEBGLCONTEXTCREATIONERROR",
    b"WEBGLCONTEXTLOST",
    b"WEBGLCONTEXTRESTORED",
    b"WEBKITANIMATIONEND",
    b"WEBKITANIMATIONITERATION",
    b"WEBKITANIMATIONSTART",
    b"WEBKITBEFORETEXTINSERTED",
    b"WEBKITBEGINFULLSCREEN",
    b"WEBKITCURRENTPLAYBACKTARGETISWIRELESSCHANGED",
    b"WEBKITENDFULLSCREEN",
    b"WEBKITFULLSCREENCHANGE",
    b"WEBKITFULLSCREENERROR",
    b"WEBKITKEYADDED",
    b"WEBKITKEYERROR",
    b"WEBKITKEYMESSAGE",
    b"WEBKITMOUSEFORCECHANGED",
    b"WEBKITMOUSEFORCEDOWN",
    b"WEBKITMOUSEFORCEUP",
    b"WEBKITMOUSEFORCEWILLBEGIN",
    b"WEBKITNEEDKEY",
    b"WEBKITNETWORKINFOCHANGE",
    b"WEBKITPLAYBACKTARGETAVAILABILITYCHANGED",
    b"WEBKITPRESENTATIONMODECHANGED",
    b"WEBKITREGIONOVERSETCHANGE",
    b"WEBKITREMOVESOURCEBUFFER",
    b"WEBKITSOURCECLOSE",
    b"WEBKITSOURCEENDED",
    b"WEBKITSOURCEOPEN",
    b"WEBKITSPEECHCHANGE",
    b"WEBKITTRANSITIONEND",
    b"WEBKITWILLREVEALBOTTOM",
    b"WEBKITWILLREVEALLEFT",
    b"WEBKITWILLREVEALRIGHT",
    b"WEBKITWILLREVEALTOP",
    b"WHEEL",
    b"WRITE",
    b"WRITEEND",
    b"WRITESTART",
    b"ZOOM",
];

/// Longest name in [`EVENTS`].
const EVENT_MAX: usize = 44;

/// URL schemes that run script or show attacker content (`JAVA` covers `javascript:`).
const BLACK_SCHEMES: &[&[u8]] = &[b"DATA", b"VIEW-SOURCE", b"JAVA", b"VBSCRIPT"];

/// Longest name in [`BLACK_SCHEMES`].
const SCHEME_MAX: usize = 11;

/// Up to `N` bytes of `s` with NULs dropped and `a`-`z` upper-cased; `None` when more than
/// `N` bytes remain (then no word of at most `N` bytes can be equal).
#[inline]
fn fold<const N: usize>(s: &[u8]) -> Option<([u8; N], usize)> {
    let mut buf = [0u8; N];
    let mut n = 0;
    for &b in s {
        if b == 0 {
            continue;
        }
        *buf.get_mut(n)? = b.to_ascii_uppercase();
        n += 1;
    }
    Some((buf, n))
}

/// `cstrcasecmp_with_null(word, s, word.len()) == 0`: the first `word.len()` bytes of `s`
/// are there, hold no NUL, and equal `word` ignoring case.
#[inline]
fn starts_with_folded(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len()
        && s.iter()
            .zip(word)
            .all(|(&b, &w)| b != 0 && b.to_ascii_uppercase() == w)
}

/// True when `name` is a tag libinjection bans: a [`is_black_tag_word`] (NULs ignored), or any
/// name starting with `svg` or `xsl` (namespaced SVG/XSLT tricks).
pub(crate) fn is_black_tag(name: &[u8]) -> bool {
    if name.len() < 3 {
        return false;
    }
    // Anything SVG or XSL(T): compared on the raw bytes, as C does.
    let head = [
        name[0].to_ascii_uppercase(),
        name[1].to_ascii_uppercase(),
        name[2].to_ascii_uppercase(),
    ];
    if head == *b"SVG" || head == *b"XSL" {
        return true;
    }
    fold::<BLACK_TAG_MAX>(name).is_some_and(|(buf, n)| is_black_tag_word(&buf[..n]))
}

/// What the attribute `name` makes of its value (C's `is_black_attr`). `name` may hold
/// NULs when it is an `attributeName` value.
pub(crate) fn attr_kind(name: &[u8], events: EventRule) -> AttrKind {
    if memchr::memchr(0, name).is_none() {
        return attr_name_kind(name, events);
    }
    if name.len() < 2 {
        return AttrKind::None;
    }
    // C checks `on` and the prefixes on the raw bytes, where a NUL never matches.
    if name.len() >= 5
        && ((name[..2].eq_ignore_ascii_case(b"on") && is_event(&name[2..], events))
            || is_prefixed(name))
    {
        return AttrKind::Black;
    }
    fold::<BLACK_ATTR_MAX>(name).map_or(AttrKind::None, |(buf, n)| black_attr_word(&buf[..n]))
}

/// The first letters of the words of [`black_attr_word`]: a name starting otherwise is
/// harmless.
static ATTR_INITIAL: [bool; 256] = {
    let mut t = [false; 256];
    let initials = b"ABDFHLPSTVX";
    let mut i = 0;
    while i < initials.len() {
        t[initials[i] as usize] = true;
        i += 1;
    }
    t
};

/// [`attr_kind`] for a name without NULs, which every attribute-name token is (the
/// tokenizer ends names at NUL): the first letter picks the one rule that can apply.
#[inline]
pub(crate) fn attr_name_kind(name: &[u8], events: EventRule) -> AttrKind {
    let len = name.len();
    if len < 2 {
        return AttrKind::None;
    }
    match name[0].to_ascii_uppercase() {
        b'O' => {
            if len >= 5 && name[1].eq_ignore_ascii_case(&b'n') && is_event(&name[2..], events) {
                AttrKind::Black
            } else {
                AttrKind::None
            }
        }
        b'X' if len >= 5 && is_prefixed(name) => AttrKind::Black,
        c if len <= BLACK_ATTR_MAX && ATTR_INITIAL[usize::from(c)] => fold::<BLACK_ATTR_MAX>(name)
            .map_or(AttrKind::None, |(buf, n)| black_attr_word(&buf[..n])),
        _ => AttrKind::None,
    }
}

/// `xmlns*` or `xlink*` (the first five bytes, no NUL among them).
#[inline]
fn is_prefixed(name: &[u8]) -> bool {
    starts_with_folded(name, b"XMLNS") || starts_with_folded(name, b"XLINK")
}

/// `rest` is what follows `on` in an attribute name of 5 bytes or more.
#[inline]
fn is_event(rest: &[u8], events: EventRule) -> bool {
    match events {
        EventRule::AnyOn => true,
        EventRule::Listed => {
            let Some(&first) = rest.first() else {
                return false;
            };
            let first = first.to_ascii_uppercase();
            let from = EVENTS.partition_point(|w| w[0] < first);
            let rest = &rest[..rest.len().min(EVENT_MAX)];
            EVENTS[from..]
                .iter()
                .take_while(|w| w[0] == first)
                .any(|w| starts_with_folded(rest, w))
        }
    }
}

/// A URL attribute's value is XSS when, after leading control/space/non-ASCII bytes and
/// with entities decoded, it starts with one of [`BLACK_SCHEMES`] (C's `is_black_url`).
pub(crate) fn is_black_url(value: &[u8]) -> bool {
    let skip = value
        .iter()
        .position(|&b| b > 0x20 && b < 0x7f)
        .unwrap_or(value.len());
    let (buf, n) = decoded_prefix::<SCHEME_MAX>(&value[skip..]);
    let head = &buf[..n];
    BLACK_SCHEMES.iter().any(|scheme| head.starts_with(scheme))
}

/// The first `N` characters `htmlencode_startswith` compares: entities decoded, leading
/// characters <= 0x20 dropped, NULs and `\n` dropped everywhere, `a`-`z` upper-cased, then
/// truncated to a byte as C's `(char)` cast does (`&#x14A;` compares as `J`).
fn decoded_prefix<const N: usize>(mut s: &[u8]) -> ([u8; N], usize) {
    let mut buf = [0u8; N];
    let mut n = 0;
    let mut first = true;
    while n < N && !s.is_empty() {
        let (c, used) = decode_char(s);
        s = s.get(used..).unwrap_or_default();
        if first && c <= 32 {
            continue;
        }
        first = false;
        if c == 0 || c == 10 {
            continue;
        }
        let c = if (u32::from(b'a')..=u32::from(b'z')).contains(&c) {
            c - 0x20
        } else {
            c
        };
        buf[n] = c as u8;
        n += 1;
    }
    (buf, n)
}

/// Value of an ASCII hex digit.
#[inline]
fn hex_digit(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

/// Largest code point C's decoder accepts; beyond it the `&` stays a literal `&`.
const MAX_CODE_POINT: u32 = 0x0010_00ff;

/// C's `html_decode_char_at` on a non-empty `s`: the character at the start of `s` with a
/// numeric entity decoded, and how many bytes it used. C reads one or two bytes past the
/// end of `s` when `s` ends in `&#` or `&#x`; those reads see the delimiter that ended the
/// token (never a digit), which we model as "not a digit".
fn decode_char(s: &[u8]) -> (u32, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let first = at(0);
    if first != b'&' || s.len() < 2 {
        return (u32::from(first), 1);
    }
    if at(1) != b'#' {
        return (u32::from(b'&'), 1);
    }
    let amp = (u32::from(b'&'), 1);
    let (radix, digits_from) = if matches!(at(2), b'x' | b'X') {
        (16, 3)
    } else {
        (10, 2)
    };
    let digit = |b: u8| {
        if radix == 16 {
            hex_digit(b)
        } else {
            (b as char).to_digit(10)
        }
    };
    let Some(mut val) = digit(at(digits_from)) else {
        return amp;
    };
    let mut i = digits_from + 1;
    while i < s.len() {
        let b = at(i);
        if b == b';' {
            return (val, i + 1);
        }
        let Some(d) = digit(b) else {
            return (val, i);
        };
        val = val * radix + d;
        if val > MAX_CODE_POINT {
            return amp;
        }
        i += 1;
    }
    (val, i)
}

/// A comment body is XSS when it holds a backtick (IE ends tags with it), starts an IE
/// conditional comment (`[if`), an XML processing instruction (`xml`), IE's `<?import`, or
/// an XML entity declaration (`ENTITY`).
pub(crate) fn is_black_comment(body: &[u8]) -> bool {
    if body.contains(&b'`') {
        return true;
    }
    if body.len() > 3
        && ((body[0] == b'[' && body[1..3].eq_ignore_ascii_case(b"if"))
            || body[..3].eq_ignore_ascii_case(b"xml"))
    {
        return true;
    }
    body.len() > 5 && (starts_with_folded(body, b"IMPORT") || starts_with_folded(body, b"ENTITY"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_and_bounded() {
        assert!(EVENTS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(EVENTS.iter().map(|w| w.len()).max(), Some(EVENT_MAX));
        assert_eq!(
            BLACK_SCHEMES.iter().map(|w| w.len()).max(),
            Some(SCHEME_MAX)
        );
        assert!(is_black_tag_word(b"VMLFRAME") && BLACK_TAG_MAX == 8);
        assert_eq!(black_attr_word(b"ATTRIBUTENAME"), AttrKind::Indirect);
        assert_eq!(BLACK_ATTR_MAX, b"ATTRIBUTENAME".len());
    }

    #[test]
    fn tags() {
        assert!(is_black_tag(b"script"));
        assert!(is_black_tag(b"sc\0ript"));
        assert!(is_black_tag(b"svgfoo"));
        assert!(!is_black_tag(b"scriptx"));
        assert!(!is_black_tag(b"b"));
    }

    #[test]
    fn attrs() {
        assert_eq!(attr_kind(b"onload", EventRule::Listed), AttrKind::Black);
        assert_eq!(attr_kind(b"onloadx", EventRule::Listed), AttrKind::Black);
        assert_eq!(attr_kind(b"onxyzw", EventRule::Listed), AttrKind::None);
        assert_eq!(attr_kind(b"onxyzw", EventRule::AnyOn), AttrKind::Black);
        assert_eq!(attr_kind(b"HrEf", EventRule::Listed), AttrKind::Url);
        assert_eq!(attr_kind(b"h\0ref", EventRule::Listed), AttrKind::Url);
        assert_eq!(attr_kind(b"xmlnsfoo", EventRule::Listed), AttrKind::Black);
    }

    #[test]
    fn urls() {
        assert!(is_black_url(b" javascript:x"));
        assert!(is_black_url(b"&#106;avascript:x"));
        assert!(is_black_url(b"&#x14A;avascript:x"));
        assert!(is_black_url(b"ja\nva"));
        assert!(!is_black_url(b"http://x"));
        assert!(!is_black_url(b"&#"));
    }
}
