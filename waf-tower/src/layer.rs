//! [`WafLayer`] and its builder.

use std::sync::Arc;

use http::HeaderName;
use tower_layer::Layer;
use waf_core::host::{HostOptions, TrustedProxies};
use waf_core::{Report, Waf};

use crate::config::{trace_report, Config, OverLimit};
use crate::service::WafService;

/// Applies a [`Waf`] to every request of the wrapped service.
///
/// `Router::new().route(..).layer(WafLayer::new(waf))`. Cheap to clone (an `Arc`).
#[derive(Clone, Debug)]
pub struct WafLayer {
    config: Arc<Config>,
}

impl WafLayer {
    /// A layer with the default options (see [`WafLayerBuilder`]).
    pub fn new(waf: Waf) -> WafLayer {
        WafLayer::builder(waf).build()
    }

    /// Starts a builder for a layer with non-default options.
    pub fn builder(waf: Waf) -> WafLayerBuilder {
        WafLayerBuilder {
            config: Config {
                waf,
                options: HostOptions::default(),
                sink: Arc::new(trace_report),
                mailer: None,
            },
        }
    }
}

impl<S> Layer<S> for WafLayer {
    type Service = WafService<S>;

    fn layer(&self, inner: S) -> WafService<S> {
        WafService::new(inner, self.config.clone())
    }
}

/// Options for a [`WafLayer`]; every one has a default.
#[derive(Debug)]
pub struct WafLayerBuilder {
    config: Config,
}

impl WafLayerBuilder {
    /// Proxies whose `X-Forwarded-For` / `Forwarded` headers and request id are believed.
    /// Default: none, so the client is always the peer.
    pub fn trusted_proxies(mut self, trusted: TrustedProxies) -> Self {
        self.config.options.trusted_proxies = trusted;
        self
    }

    /// The header that carries the request id on every response (and, from a trusted
    /// proxy, on the request). Default: [`DEFAULT_REQUEST_ID_HEADER`](crate::DEFAULT_REQUEST_ID_HEADER) (`x-request-id`).
    pub fn request_id_header(mut self, name: HeaderName) -> Self {
        self.config.options.request_id_header = name;
        self
    }

    /// The most request body bytes buffered for inspection. Default:
    /// [`DEFAULT_REQUEST_BODY_LIMIT`](crate::DEFAULT_REQUEST_BODY_LIMIT). The engine's own `SecRequestBodyLimit` also applies:
    /// the smaller limit wins.
    pub fn request_body_limit(mut self, bytes: usize) -> Self {
        self.config.options.request_body_limit = bytes;
        self
    }

    /// What to do with a request body larger than the limit. Default: [`OverLimit::Reject`]
    /// (413, and the handler never runs). A `Content-Length` over the limit is rejected
    /// before any of the body is read.
    pub fn request_body_over_limit(mut self, action: OverLimit) -> Self {
        self.config.options.request_body_over_limit = action;
        self
    }

    /// The most response body bytes buffered for inspection (only for MIME types the rules
    /// inspect). Default: [`DEFAULT_RESPONSE_BODY_LIMIT`](crate::DEFAULT_RESPONSE_BODY_LIMIT).
    pub fn response_body_limit(mut self, bytes: usize) -> Self {
        self.config.options.response_body_limit = bytes;
        self
    }

    /// What to do with an inspected response body larger than the limit. Default:
    /// [`OverLimit::ProcessPartial`] (inspect the prefix, send the whole body).
    pub fn response_body_over_limit(mut self, action: OverLimit) -> Self {
        self.config.options.response_body_over_limit = action;
        self
    }

    /// Sends every transaction's [`Report`] to `sink` instead of the default `tracing`
    /// event (target `waf`: `info` for blocks and would-be blocks, `debug` for other
    /// matches). Called once per transaction, when the response is done or dropped; keep it
    /// fast (hand off to a channel for slow work).
    pub fn on_report(mut self, sink: impl Fn(&Report) + Send + Sync + 'static) -> Self {
        self.config.sink = Arc::new(sink);
        self
    }

    /// Adds a native policy (rules with conditions, lists, rate limits, bans, IP
    /// intelligence, and the gates: challenges, waiting rooms, sign-in:
    /// [`waf_core::policy`]) to the layer's `Waf`; its errors name the rule, line and
    /// column. The gates' endpoints (`/.waf/` by default) are answered by the middleware;
    /// sign-in needs a [`mailer`](Self::mailer).
    pub fn policy(
        self,
        config: &waf_core::policy::PolicyConfig,
    ) -> Result<Self, waf_core::policy::PolicyError> {
        self.attach_policy(config, None)
    }

    /// Adds a native policy whose rate limits and bans hold for a whole fleet: its state
    /// lives in `store` (from [`waf_redis::Fleet::store`], the same namespace on every
    /// node), decided locally and reconciled with Redis in the background.
    #[cfg(feature = "redis")]
    pub fn fleet_policy(
        self,
        config: &waf_core::policy::PolicyConfig,
        store: Arc<waf_redis::FleetStore>,
    ) -> Result<Self, waf_core::policy::PolicyError> {
        self.attach_policy(config, Some(store))
    }

    /// Sends the sign-in mails (`[gates.sign_in]`): the application's own [`Mailer`], or
    /// [`SmtpMailer`](crate::SmtpMailer) (feature `smtp`). Without one, a sign-in form
    /// gets the "could not send" page.
    ///
    /// [`Mailer`]: waf_core::host::Mailer
    pub fn mailer(mut self, mailer: Arc<dyn waf_core::host::Mailer>) -> Self {
        self.config.mailer = Some(mailer);
        self
    }

    /// Compiles `config` into the `Waf`, with its state in `store` (a new in-memory one
    /// when `None`).
    fn attach_policy(
        mut self,
        config: &waf_core::policy::PolicyConfig,
        store: Option<Arc<dyn waf_core::policy::Store>>,
    ) -> Result<Self, waf_core::policy::PolicyError> {
        self.config.waf = self.config.waf.with_policy(config, store)?;
        Ok(self)
    }

    /// The layer.
    pub fn build(self) -> WafLayer {
        if self.config.waf.has_sign_in() && self.config.mailer.is_none() {
            tracing::warn!(
                "[gates.sign_in] without a mailer (WafLayerBuilder::mailer): no sign-in code can be sent"
            );
        }
        WafLayer {
            config: Arc::new(self.config),
        }
    }
}
