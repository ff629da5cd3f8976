/*
 * ngx_http_waf_module: runs waf-core (through the waf-ffi C ABI, waf.h) inside nginx.
 *
 * Directives (http, server, location; merged down):
 *
 *   waf on | off;             inspect requests in this context (default off)
 *   waf_rules_file PATH;      load a SecLang file (relative to the nginx prefix)
 *   waf_rules 'SecLang text'; load inline rules
 *   waf_policy_file PATH;     load a native policy (TOML)
 *   waf_response_buffer_size SIZE;
 *                             most response body bytes held back for inspection
 *                             (default 1m); see "Limits"
 *   waf_fail_open on | off;   when the engine fails (a caught panic, an error): on passes
 *                             the request and logs at "alert"; off (the default, as
 *                             before the directive existed) answers 500
 *   waf_audit_log PATH | off; appends the JSON audit record of every transaction in
 *                             which a rule logged or an intervention happened to PATH,
 *                             one line each, instead of the "info" error log line
 *                             (default off; reopened on USR1 like access logs)
 *   waf_smtp HOST:PORT plain | starttls | tls from=ADDRESS [user=NAME
 *            password_file=PATH] [timeout=TIME];
 *                             (http block only) the SMTP relay through which the
 *                             library sends the email-code sign-in mails
 *                             ([gates.sign_in]); from=ADDRESS may be "Name <address>"
 *                             (quote it); password_file is read at load (relative to
 *                             the prefix, trailing newline removed); timeout bounds one
 *                             mail (default 10s). Checked at load; nothing connects
 *                             until the first mail.
 *   waf_fleet redis://HOST:PORT [URL ...] [cluster] [namespace=NAME] [prefix=PREFIX]
 *             [interval=TIME] [timeout=TIME] [cut_off=local|share] [nodes=N];
 *                             (http block only) share the native policy's rate limits,
 *                             bans, behaviour scores, waiting rooms and sign-in
 *                             (codes, attempts, lockouts, sign-outs) through Redis
 *                             between all workers and every nginx that uses the same
 *                             Redis and namespace (default "nginx"); see waf_builder_fleet.
 *                             Checked at load; each worker connects on its first request
 *                             and never waits on Redis (decisions use a local mirror).
 *                             Sign-in codes and sign-out revocations stay per worker.
 *
 * The transaction id is nginx's $request_id, so an audit record, the "warn" summary and
 * the access log (log_format ... $request_id) or a response header (add_header
 * X-Request-Id $request_id always) can be matched up.
 *
 * A context that names no rules inherits its parent's engine; a context that adds rules
 * gets an engine built from its parent's rules followed by its own. Engines are built once
 * per configuration load, in the master, and shared by the workers it forks. Each engine is
 * freed by a cleanup on the configuration's pool, so a reload builds new engines and the
 * master frees the old ones as soon as the new configuration is in place.
 *
 * Where each phase runs (phase wiring after ModSecurity-nginx):
 *
 *   phase 1  request headers        access phase handler
 *   phase 2  request body           same handler: the body is read in full
 *                                   (ngx_http_read_client_request_body) and inspected
 *                                   before the content handler (proxy_pass) runs
 *   phase 3  response headers       header filter
 *   phase 4  response body          body filter; when the engine inspects the body, the
 *                                   header is held back and the body is buffered (up to
 *                                   waf_response_buffer_size) so that a rule can
 *                                   still replace the response with its status
 *   phase 5  logging                log phase handler; the report callback writes a
 *                                   summary (status, rule, scores, logged rule ids) to the
 *                                   error log at "warn" when a rule logged or an
 *                                   intervention happened, and the JSON audit record at
 *                                   "info" (or to the waf_audit_log file)
 *
 * An intervention answers with the rule's status (deny), a redirect (Location + 3xx), or
 * closes the connection (drop). A status outside 300..599 becomes 403.
 *
 * Gates (a policy with [gates]): a challenge or the waiting room answers with the
 * library's own page, JSON or redirect (waf_tx_answer: the same pages every host serves);
 * requests under the gate prefix (/.waf/ by default) are answered by the library with
 * their form body (waf_tx_gate_request; bodies over WAF_GATE_FORM_LEN or spooled to a file
 * get 413) and never reach the content handler; a response that went through gets the
 * gates' cookies (admission, renewals) in the header filter. Email-code sign-in needs
 * waf_smtp (without it the configuration test fails and says so): the code mail is handed
 * to the library's mail thread (waf_engine_send_mail, a bounded queue, so a worker never
 * waits for the relay) and the visitor gets the "a code is on its way" page at once; a mail
 * the relay then refuses is logged by that thread (on stderr, which nginx sends to the
 * error log; never the code or the address), and the visitor can ask for a new code; a
 * full queue answers the "could not send" page (waf_answer_mail_failed). Codes and sign-out
 * revocations are policy state, per worker process (waf_fleet shares the rest of the
 * policy state between workers, not these). Subrequests are not
 * inspected (their main request is). Internal redirects keep the transaction of the main
 * request, found again through its pool cleanup.
 *
 * Limits: request bodies are bounded by client_max_body_size and the engine's
 * SecRequestBodyLimit; buffered response bodies by waf_response_buffer_size, past
 * which the buffered part is inspected, the response is released, and the rest streams
 * through uninspected (ModSecurity's ProcessPartial). A response body that arrives in one
 * buffer larger than the size is not inspected at all. The directives of the location that
 * serves the request (after internal redirects) apply.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "waf.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif


/* Default of waf_response_buffer_size: most response body bytes held back (1 MiB). */
#define NGX_HTTP_WAF_DEFAULT_RESPONSE_BUFFER  (1024 * 1024)

/* Longest $request_id passed as the transaction id (nginx makes 32 hex digits). */
#define NGX_HTTP_WAF_MAX_ID_LEN           128

/* Bytes read at a time from a request body kept in a temporary file. */
#define NGX_HTTP_WAF_FILE_CHUNK           16384


typedef enum {
    NGX_HTTP_WAF_SRC_FILE = 0,
    NGX_HTTP_WAF_SRC_TEXT,
    NGX_HTTP_WAF_SRC_POLICY
} ngx_http_waf_src_kind_e;


typedef struct {
    ngx_http_waf_src_kind_e  kind;
    ngx_str_t                value;  /* NUL-terminated path or text */
    ngx_str_t                name;   /* "nginx.conf:LINE", NUL-terminated */
} ngx_http_waf_src_t;


typedef struct {
    ngx_flag_t               enable;
    ngx_array_t             *rules;      /* this context's own sources, or NULL */
    ngx_array_t             *all_rules;  /* parent's sources + own, after merge */
    waf_engine              *engine;     /* NULL when there are no rules */
    ngx_flag_t               built;
    size_t                   response_buffer_size;
    ngx_flag_t               fail_open;
    ngx_open_file_t         *audit_log;  /* NULL: off */
} ngx_http_waf_loc_conf_t;


/* The http block's waf_smtp: strings NUL-terminated, in the configuration pool. */
typedef struct {
    ngx_flag_t               smtp_set;
    waf_smtp                 smtp;
    ngx_flag_t               fleet_set;   /* waf_fleet: servers etc. in the pool */
    ngx_flag_t               fleet_used;  /* some engine has state to share */
    ngx_uint_t               fleet_line;  /* where waf_fleet is, for the error */
    ngx_str_t                fleet_file;
    waf_fleet                fleet;
} ngx_http_waf_main_conf_t;


typedef struct {
    ngx_http_request_t      *r;
    waf_tx                  *tx;
    ngx_int_t                access_rc;   /* NGX_AGAIN until phases 1-2 are decided */
    ngx_chain_t             *out;         /* held-back response body */
    ngx_chain_t            **last_out;
    size_t                   buffered;
    unsigned                 body_requested:1;
    unsigned                 intervened:1;
    unsigned                 resp_headers_done:1;
    unsigned                 resp_buffering:1;
    unsigned                 finished:1;
    unsigned                 failed:1;    /* the engine failed and waf_fail_open passed */
} ngx_http_waf_ctx_t;


static ngx_int_t ngx_http_waf_init(ngx_conf_t *cf);
static void *ngx_http_waf_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_waf_smtp(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_waf_fleet(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static void *ngx_http_waf_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_waf_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_http_waf_rules_file(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_waf_rules(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_waf_policy_file(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_waf_audit_log(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);


static ngx_str_t   ngx_http_waf_request_id = ngx_string("request_id");
static ngx_int_t   ngx_http_waf_request_id_index = NGX_ERROR;


static ngx_command_t  ngx_http_waf_commands[] = {

    { ngx_string("waf"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_waf_loc_conf_t, enable),
      NULL },

    { ngx_string("waf_rules_file"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_waf_rules_file,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("waf_rules"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_waf_rules,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    /* The native policy (rules with conditions, lists, rate limits, bans, geo) from a
     * TOML file, the same format the proxy and the middleware take. Its state (rate-limit
     * buckets, bans) is per worker process. */
    { ngx_string("waf_policy_file"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_waf_policy_file,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("waf_response_buffer_size"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_waf_loc_conf_t, response_buffer_size),
      NULL },

    { ngx_string("waf_fail_open"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_waf_loc_conf_t, fail_open),
      NULL },

    { ngx_string("waf_audit_log"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_waf_audit_log,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("waf_smtp"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_waf_smtp,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("waf_fleet"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_waf_fleet,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_waf_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_http_waf_init,                     /* postconfiguration */
    ngx_http_waf_create_main_conf,         /* create main configuration */
    NULL,                                  /* init main configuration */
    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */
    ngx_http_waf_create_loc_conf,          /* create location configuration */
    ngx_http_waf_merge_loc_conf            /* merge location configuration */
};


ngx_module_t  ngx_http_waf_module = {
    NGX_MODULE_V1,
    &ngx_http_waf_module_ctx,              /* module context */
    ngx_http_waf_commands,                 /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    NULL,                                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


/* Configuration */

static void *
ngx_http_waf_create_main_conf(ngx_conf_t *cf)
{
    return ngx_pcalloc(cf->pool, sizeof(ngx_http_waf_main_conf_t));
}


/* A copy of `len` bytes at `data` as a NUL-terminated string in the pool. */
static const char *
ngx_http_waf_cstr(ngx_conf_t *cf, u_char *data, size_t len)
{
    u_char  *p;

    p = ngx_pnalloc(cf->pool, len + 1);
    if (p == NULL) {
        return NULL;
    }
    ngx_memcpy(p, data, len);
    p[len] = '\0';
    return (const char *) p;
}


static char *
ngx_http_waf_smtp(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_waf_main_conf_t  *mcf = conf;

    u_char       *colon;
    ssize_t       n;
    ngx_str_t    *value, host, path;
    ngx_int_t     port, ms;
    ngx_uint_t    i;
    ngx_file_t    file;
    u_char        buf[1024];

    if (mcf->smtp_set) {
        return "is duplicate";
    }
    value = cf->args->elts;

    /* HOST:PORT, HOST may be [v6] */
    colon = NULL;
    for (i = 0; i < value[1].len; i++) {
        if (value[1].data[i] == ':') {
            colon = &value[1].data[i];
        }
    }
    if (colon == NULL) {
        return "takes HOST:PORT first";
    }
    host.data = value[1].data;
    host.len = colon - value[1].data;
    if (host.len > 2 && host.data[0] == '[' && host.data[host.len - 1] == ']') {
        host.data++;
        host.len -= 2;
    }
    port = ngx_atoi(colon + 1, value[1].data + value[1].len - colon - 1);
    if (host.len == 0 || port < 1 || port > 65535) {
        return "takes HOST:PORT first (a port of 1-65535)";
    }
    mcf->smtp.host = ngx_http_waf_cstr(cf, host.data, host.len);
    mcf->smtp.port = (uint16_t) port;

    if (ngx_strcmp(value[2].data, "plain") == 0) {
        mcf->smtp.security = WAF_SMTP_PLAIN;
    } else if (ngx_strcmp(value[2].data, "starttls") == 0) {
        mcf->smtp.security = WAF_SMTP_STARTTLS;
    } else if (ngx_strcmp(value[2].data, "tls") == 0) {
        mcf->smtp.security = WAF_SMTP_TLS;
    } else {
        return "takes plain, starttls or tls second";
    }

    for (i = 3; i < cf->args->nelts; i++) {
        if (ngx_strncmp(value[i].data, "from=", 5) == 0) {
            mcf->smtp.from = ngx_http_waf_cstr(cf, value[i].data + 5, value[i].len - 5);

        } else if (ngx_strncmp(value[i].data, "user=", 5) == 0) {
            mcf->smtp.username = ngx_http_waf_cstr(cf, value[i].data + 5, value[i].len - 5);

        } else if (ngx_strncmp(value[i].data, "password_file=", 14) == 0) {
            path.data = value[i].data + 14;
            path.len = value[i].len - 14;
            if (path.len == 0 || ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK) {
                return "takes a non-empty password_file=PATH";
            }
            ngx_memzero(&file, sizeof(ngx_file_t));
            file.name = path;
            file.log = cf->log;
            file.fd = ngx_open_file(path.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
            if (file.fd == NGX_INVALID_FILE) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                                   "waf_smtp: cannot open \"%V\"", &path);
                return NGX_CONF_ERROR;
            }
            n = ngx_read_file(&file, buf, sizeof(buf), 0);
            ngx_close_file(file.fd);
            if (n < 0 || n == (ssize_t) sizeof(buf)) {
                return "password_file cannot be read or is over 1023 bytes";
            }
            while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
                n--;
            }
            mcf->smtp.password = ngx_http_waf_cstr(cf, buf, n);
            ngx_explicit_memzero(buf, sizeof(buf));

        } else if (ngx_strncmp(value[i].data, "timeout=", 8) == 0) {
            path.data = value[i].data + 8;
            path.len = value[i].len - 8;
            ms = ngx_parse_time(&path, 0);
            if (ms == NGX_ERROR || ms <= 0 || ms > 3600000) {
                return "takes timeout=TIME of 1ms to 1h";
            }
            mcf->smtp.timeout_ms = (uint32_t) ms;

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "waf_smtp: unknown parameter \"%V\"", &value[i]);
            return NGX_CONF_ERROR;
        }
    }

    if (mcf->smtp.from == NULL) {
        return "needs from=ADDRESS";
    }
    if ((mcf->smtp.username == NULL) != (mcf->smtp.password == NULL)) {
        return "needs user= and password_file= together";
    }

    /* the library checks the rest (the from address) now, so that nginx -t says so */
    {
        waf_builder  *b = waf_builder_new();
        waf_status    st;
        const char   *err;

        if (b == NULL) {
            return NGX_CONF_ERROR;
        }
        st = waf_builder_smtp(b, &mcf->smtp);
        err = waf_last_error();
        waf_builder_free(b);
        if (st != WAF_STATUS_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "waf_smtp: %s", err ? err : "?");
            return NGX_CONF_ERROR;
        }
    }

    mcf->smtp_set = 1;
    return NGX_CONF_OK;
}


/*
 * waf_fleet URL [URL ...] [cluster] [namespace=NAME] [prefix=PREFIX] [interval=TIME]
 *           [timeout=TIME] [cut_off=local|share] [nodes=N];
 */
static char *
ngx_http_waf_fleet(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_waf_main_conf_t  *mcf = conf;

    ngx_str_t     *value, t;
    ngx_int_t      ms, n;
    ngx_uint_t     i, count;
    const char   **servers;

    if (mcf->fleet_set) {
        return "is duplicate";
    }
    value = cf->args->elts;

    servers = ngx_pcalloc(cf->pool, cf->args->nelts * sizeof(const char *));
    if (servers == NULL) {
        return NGX_CONF_ERROR;
    }
    count = 0;
    mcf->fleet.namespace_name = "nginx";

    for (i = 1; i < cf->args->nelts; i++) {
        if (ngx_strncmp(value[i].data, "redis://", 8) == 0
            || ngx_strncmp(value[i].data, "rediss://", 9) == 0
            || ngx_strncmp(value[i].data, "redis+unix://", 13) == 0
            || ngx_strncmp(value[i].data, "unix://", 7) == 0)
        {
            servers[count++] = ngx_http_waf_cstr(cf, value[i].data, value[i].len);

        } else if (ngx_strcmp(value[i].data, "cluster") == 0) {
            mcf->fleet.cluster = true;

        } else if (ngx_strncmp(value[i].data, "namespace=", 10) == 0) {
            mcf->fleet.namespace_name = ngx_http_waf_cstr(cf, value[i].data + 10,
                                                          value[i].len - 10);

        } else if (ngx_strncmp(value[i].data, "prefix=", 7) == 0) {
            mcf->fleet.prefix = ngx_http_waf_cstr(cf, value[i].data + 7, value[i].len - 7);

        } else if (ngx_strncmp(value[i].data, "interval=", 9) == 0
                   || ngx_strncmp(value[i].data, "timeout=", 8) == 0)
        {
            t.data = (u_char *) ngx_strchr(value[i].data, '=') + 1;
            t.len = value[i].data + value[i].len - t.data;
            ms = ngx_parse_time(&t, 0);
            if (ms == NGX_ERROR || ms <= 0 || ms > 3600000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "waf_fleet: \"%V\" is not a time", &value[i]);
                return NGX_CONF_ERROR;
            }
            if (value[i].data[0] == 'i') {
                mcf->fleet.interval_ms = (uint32_t) ms;
            } else {
                mcf->fleet.timeout_ms = (uint32_t) ms;
            }

        } else if (ngx_strcmp(value[i].data, "cut_off=local") == 0) {
            mcf->fleet.cut_off = WAF_FLEET_CUT_OFF_LOCAL;

        } else if (ngx_strcmp(value[i].data, "cut_off=share") == 0) {
            mcf->fleet.cut_off = WAF_FLEET_CUT_OFF_SHARE;

        } else if (ngx_strncmp(value[i].data, "nodes=", 6) == 0) {
            n = ngx_atoi(value[i].data + 6, value[i].len - 6);
            if (n < 1) {
                return "takes nodes=N of at least 1";
            }
            mcf->fleet.nodes = (uint32_t) (n > 100000 ? 100000 : n);

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "waf_fleet: unknown parameter \"%V\" (a server is "
                               "redis://HOST:PORT)", &value[i]);
            return NGX_CONF_ERROR;
        }
    }

    if (count == 0) {
        return "needs a redis://HOST:PORT server";
    }
    mcf->fleet.servers = servers;
    mcf->fleet.server_count = count;

    /* the library checks the rest (URLs, bounds) now, so that nginx -t says so */
    {
        waf_builder  *b = waf_builder_new();
        waf_status    st;
        const char   *err;

        if (b == NULL) {
            return NGX_CONF_ERROR;
        }
        st = waf_builder_fleet(b, &mcf->fleet);
        err = waf_last_error();
        waf_builder_free(b);
        if (st != WAF_STATUS_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "waf_fleet: %s", err ? err : "?");
            return NGX_CONF_ERROR;
        }
    }

    mcf->fleet_set = 1;
    mcf->fleet_line = cf->conf_file->line;
    mcf->fleet_file = cf->conf_file->file.name;
    return NGX_CONF_OK;
}

static void *
ngx_http_waf_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_waf_loc_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_waf_loc_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    conf->enable = NGX_CONF_UNSET;
    conf->response_buffer_size = NGX_CONF_UNSET_SIZE;
    conf->fail_open = NGX_CONF_UNSET;
    conf->audit_log = NGX_CONF_UNSET_PTR;

    return conf;
}


static char *
ngx_http_waf_add_src(ngx_conf_t *cf, ngx_http_waf_loc_conf_t *conf,
    ngx_http_waf_src_kind_e kind, ngx_str_t *value)
{
    u_char              *p;
    size_t               len;
    ngx_http_waf_src_t  *src;

    if (conf->rules == NULL) {
        conf->rules = ngx_array_create(cf->pool, 4, sizeof(ngx_http_waf_src_t));
        if (conf->rules == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    src = ngx_array_push(conf->rules);
    if (src == NULL) {
        return NGX_CONF_ERROR;
    }

    src->kind = kind;

    /* ngx_conf values are NUL-terminated, but copy to be sure of it */
    src->value.data = ngx_pnalloc(cf->pool, value->len + 1);
    if (src->value.data == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memcpy(src->value.data, value->data, value->len);
    src->value.data[value->len] = '\0';
    src->value.len = value->len;

    len = cf->conf_file->file.name.len + NGX_INT_T_LEN + 2;
    src->name.data = ngx_pnalloc(cf->pool, len);
    if (src->name.data == NULL) {
        return NGX_CONF_ERROR;
    }
    p = ngx_snprintf(src->name.data, len - 1, "%V:%ui",
                     &cf->conf_file->file.name, cf->conf_file->line);
    *p = '\0';
    src->name.len = p - src->name.data;

    return NGX_CONF_OK;
}


/* A directive whose one argument is a file (resolved against the prefix) added as a source
 * of `kind`: waf_rules_file and waf_policy_file. */
static char *
ngx_http_waf_file_src(ngx_conf_t *cf, void *conf, ngx_http_waf_src_kind_e kind)
{
    ngx_str_t  *value, path;

    value = cf->args->elts;
    path = value[1];

    if (path.len == 0) {
        return "takes a non-empty path";
    }

    if (ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return ngx_http_waf_add_src(cf, conf, kind, &path);
}


static char *
ngx_http_waf_rules_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    return ngx_http_waf_file_src(cf, conf, NGX_HTTP_WAF_SRC_FILE);
}


static char *
ngx_http_waf_policy_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    return ngx_http_waf_file_src(cf, conf, NGX_HTTP_WAF_SRC_POLICY);
}


static char *
ngx_http_waf_audit_log(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_str_t                *value;
    ngx_http_waf_loc_conf_t  *lcf = conf;

    if (lcf->audit_log != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (value[1].len == 0) {
        return "takes a non-empty path or \"off\"";
    }

    if (ngx_strcmp(value[1].data, "off") == 0) {
        lcf->audit_log = NULL;
        return NGX_CONF_OK;
    }

    /* opened by the master (relative to the prefix), O_APPEND, reopened on USR1 */
    lcf->audit_log = ngx_conf_open_file(cf->cycle, &value[1]);
    if (lcf->audit_log == NULL) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_waf_rules(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_str_t  *value;

    value = cf->args->elts;

    return ngx_http_waf_add_src(cf, conf, NGX_HTTP_WAF_SRC_TEXT, &value[1]);
}


static void ngx_http_waf_report(void *user_data, const waf_report *report);


static void
ngx_http_waf_engine_cleanup(void *data)
{
    waf_engine_free(data);
#if defined(__GLIBC__)
    /*
     * An engine is tens of MiB in many allocations; after a reload frees the old one,
     * hand the free pages back so the master and new workers do not keep them.
     */
    malloc_trim(0);
#endif
}


/* Builds conf->engine from conf->all_rules, once. */
static ngx_int_t
ngx_http_waf_ensure_engine(ngx_conf_t *cf, ngx_http_waf_loc_conf_t *conf)
{
    ngx_uint_t           i;
    waf_status           st;
    waf_builder         *b;
    waf_engine          *engine;
    const char          *err;
    ngx_pool_cleanup_t  *cln;
    ngx_http_waf_src_t  *src;

    ngx_http_waf_main_conf_t  *mcf;

    if (conf->built) {
        return NGX_OK;
    }

    conf->built = 1;

    if (conf->all_rules == NULL) {
        conf->all_rules = conf->rules;
    }

    if (conf->all_rules == NULL || conf->all_rules->nelts == 0) {
        return NGX_OK;
    }

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    b = waf_builder_new();
    if (b == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "waf: cannot create a builder");
        return NGX_ERROR;
    }

    src = conf->all_rules->elts;
    /* the module serves the gates' endpoints, pages and cookies (not sign-in: below) */
    st = waf_builder_serve_gates(b, true);

    for (i = 0; i < conf->all_rules->nelts && st == WAF_STATUS_OK; i++) {
        if (src[i].kind == NGX_HTTP_WAF_SRC_FILE) {
            st = waf_builder_rules_file(b, (const char *) src[i].value.data);

        } else if (src[i].kind == NGX_HTTP_WAF_SRC_POLICY) {
            st = waf_builder_policy_file(b, (const char *) src[i].value.data);

        } else {
            st = waf_builder_rules(b, (const char *) src[i].name.data,
                                   (const char *) src[i].value.data,
                                   src[i].value.len);
        }
    }

    if (st == WAF_STATUS_OK) {
        st = waf_builder_report_callback(b, ngx_http_waf_report);
    }

    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_waf_module);
    if (st == WAF_STATUS_OK && mcf->smtp_set) {
        st = waf_builder_smtp(b, &mcf->smtp);
    }

    /* the policy state in Redis, started in each worker on its first request */
    if (st == WAF_STATUS_OK && mcf->fleet_set) {
        st = waf_builder_fleet(b, &mcf->fleet);
    }

    if (st != WAF_STATUS_OK) {
        waf_builder_free(b);
        err = waf_last_error();
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "waf: %s", err ? err : "?");
        return NGX_ERROR;
    }

    engine = NULL;
    st = waf_builder_build(b, &engine);

    if (st != WAF_STATUS_OK) {
        err = waf_last_error();
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "waf: rules failed to load: %s",
                           err ? err : "?");
        return NGX_ERROR;
    }

    cln->handler = ngx_http_waf_engine_cleanup;
    cln->data = engine;
    conf->engine = engine;

    if (waf_engine_uses_fleet(engine)) {
        mcf->fleet_used = 1;
    }

    if (waf_engine_has_sign_in(engine) && !mcf->smtp_set) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "waf: [gates.sign_in] sends its codes by mail: add "
                           "\"waf_smtp HOST:PORT plain|starttls|tls from=ADDRESS;\" "
                           "to the http block");
        return NGX_ERROR;
    }

    return NGX_OK;
}


static char *
ngx_http_waf_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_waf_loc_conf_t  *prev = parent;
    ngx_http_waf_loc_conf_t  *conf = child;

    ngx_uint_t           n;
    ngx_http_waf_src_t  *src;

    ngx_conf_merge_value(conf->enable, prev->enable, 0);
    ngx_conf_merge_size_value(conf->response_buffer_size, prev->response_buffer_size,
                              NGX_HTTP_WAF_DEFAULT_RESPONSE_BUFFER);
    ngx_conf_merge_value(conf->fail_open, prev->fail_open, 0);
    ngx_conf_merge_ptr_value(conf->audit_log, prev->audit_log, NULL);

    if (ngx_http_waf_ensure_engine(cf, prev) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    if (conf->rules == NULL) {
        conf->all_rules = prev->all_rules;
        conf->engine = prev->engine;
        conf->built = 1;
        return NGX_CONF_OK;
    }

    n = conf->rules->nelts + (prev->all_rules ? prev->all_rules->nelts : 0);

    conf->all_rules = ngx_array_create(cf->pool, n, sizeof(ngx_http_waf_src_t));
    if (conf->all_rules == NULL) {
        return NGX_CONF_ERROR;
    }

    if (prev->all_rules) {
        src = ngx_array_push_n(conf->all_rules, prev->all_rules->nelts);
        if (src == NULL) {
            return NGX_CONF_ERROR;
        }
        ngx_memcpy(src, prev->all_rules->elts,
                   prev->all_rules->nelts * sizeof(ngx_http_waf_src_t));
    }

    src = ngx_array_push_n(conf->all_rules, conf->rules->nelts);
    if (src == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memcpy(src, conf->rules->elts,
               conf->rules->nelts * sizeof(ngx_http_waf_src_t));

    if (ngx_http_waf_ensure_engine(cf, conf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* Request context */

static void
ngx_http_waf_cleanup(void *data)
{
    ngx_http_waf_ctx_t  *ctx = data;

    waf_tx_free(ctx->tx);
    ctx->tx = NULL;
}


/*
 * The context, also after an internal redirect or ngx_http_filter_finalize_request()
 * cleared the module contexts: it is found again through the pool cleanup.
 */
static ngx_http_waf_ctx_t *
ngx_http_waf_get_ctx(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t  *cln;
    ngx_http_waf_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_waf_module);

    if (ctx == NULL && (r->internal || r->filter_finalize)) {
        for (cln = r->pool->cleanup; cln; cln = cln->next) {
            if (cln->handler == ngx_http_waf_cleanup) {
                ctx = cln->data;
                ngx_http_set_ctx(r, ctx, ngx_http_waf_module);
                break;
            }
        }
    }

    return ctx;
}


static waf_header *
ngx_http_waf_collect_headers(ngx_http_request_t *r, ngx_list_t *list,
    ngx_uint_t extra, size_t *n)
{
    ngx_uint_t        i, count;
    waf_header       *hs;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    count = 0;
    for (part = &list->part; part; part = part->next) {
        count += part->nelts;
    }

    hs = ngx_palloc(r->pool, (count + extra + 1) * sizeof(waf_header));
    if (hs == NULL) {
        return NULL;
    }

    *n = 0;
    for (part = &list->part; part; part = part->next) {
        h = part->elts;
        for (i = 0; i < part->nelts; i++) {
            if (h[i].hash == 0) {
                continue;  /* deleted */
            }
            hs[*n].name = h[i].key.data;
            hs[*n].name_len = h[i].key.len;
            hs[*n].value = h[i].value.data;
            hs[*n].value_len = h[i].value.len;
            (*n)++;
        }
    }

    return hs;
}


static ngx_int_t
ngx_http_waf_status(ngx_int_t status)
{
    if (status < 300 || status > 599) {
        return NGX_HTTP_FORBIDDEN;
    }
    return status;
}


/*
 * Turns a phase result into what nginx should do: NGX_DECLINED to go on, or an HTTP status
 * (or NGX_HTTP_CLOSE) to answer with.
 */
static ngx_int_t
ngx_http_waf_decide(ngx_http_request_t *r, ngx_http_waf_ctx_t *ctx,
    waf_status st, waf_intervention *iv, const char *phase)
{
    size_t                    len;
    uint64_t                  retry;
    const char               *err;
    ngx_uint_t                level;
    ngx_table_elt_t          *h;
    ngx_http_waf_loc_conf_t  *lcf;

    if (st == WAF_STATUS_OK) {
        return NGX_DECLINED;
    }

    if (st != WAF_STATUS_INTERVENE) {
        /* the engine failed: a caught panic (WAF_STATUS_PANIC) or an error */
        lcf = ngx_http_get_module_loc_conf(r, ngx_http_waf_module);
        err = waf_last_error();

        if (lcf->fail_open) {
            if (!ctx->failed) {
                ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                              "waf: %s failed (status %d), passing the request "
                              "(waf_fail_open on): %s", phase, (int) st,
                              err ? err : "?");
            }
            ctx->failed = 1;
            return NGX_DECLINED;
        }

        level = (st == WAF_STATUS_PANIC) ? NGX_LOG_ALERT : NGX_LOG_ERR;
        ngx_log_error(level, r->connection->log, 0,
                      "waf: %s failed (status %d), answering 500 "
                      "(waf_fail_open off): %s", phase, (int) st, err ? err : "?");
        ctx->intervened = 1;
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    switch (iv->action) {

    case WAF_ACTION_NONE:
        return NGX_DECLINED;

    case WAF_ACTION_DROP:
        ctx->intervened = 1;
        return NGX_HTTP_CLOSE;

    case WAF_ACTION_REDIRECT:
        ctx->intervened = 1;
        if (iv->url == NULL) {
            return NGX_HTTP_FORBIDDEN;
        }

        ngx_http_clear_location(r);

        h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        len = ngx_strlen(iv->url);
        h->value.data = ngx_pnalloc(r->pool, len);
        if (h->value.data == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ngx_memcpy(h->value.data, iv->url, len);
        h->value.len = len;
        h->hash = 1;
        ngx_str_set(&h->key, "Location");
#if (nginx_version >= 1023000)
        h->next = NULL;
#endif
        r->headers_out.location = h;

        if (iv->status >= 300 && iv->status < 400) {
            return iv->status;
        }
        return NGX_HTTP_MOVED_TEMPORARILY;

    default:
        ctx->intervened = 1;
        retry = waf_tx_retry_after(ctx->tx);
        if (retry > 0) {
            h = ngx_list_push(&r->headers_out.headers);
            if (h == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            h->value.data = ngx_pnalloc(r->pool, NGX_OFF_T_LEN);
            if (h->value.data == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            h->value.len = ngx_sprintf(h->value.data, "%uL", (uint64_t) retry)
                           - h->value.data;
            h->hash = 1;
            ngx_str_set(&h->key, "Retry-After");
#if (nginx_version >= 1023000)
            h->next = NULL;
#endif
        }
        return ngx_http_waf_status(iv->status);
    }
}


/* Phase 2: feeds the request body and decides. */
static ngx_int_t
ngx_http_waf_inspect_body(ngx_http_request_t *r, ngx_http_waf_ctx_t *ctx)
{
    off_t              off;
    size_t             len;
    ssize_t            n;
    u_char            *buf;
    ngx_buf_t         *b;
    ngx_int_t          rc;
    waf_status         st;
    ngx_chain_t       *cl;
    waf_intervention   iv;

    buf = NULL;

    if (r->request_body != NULL) {
        for (cl = r->request_body->bufs; cl; cl = cl->next) {
            b = cl->buf;

            if (!b->in_file || ngx_buf_in_memory(b)) {
                st = waf_tx_request_body(ctx->tx, b->pos, b->last - b->pos, &iv);
                rc = ngx_http_waf_decide(r, ctx, st, &iv, "request body");
                if (rc != NGX_DECLINED) {
                    return rc;
                }
                continue;
            }

            /* a body spooled to client_body_temp_path */
            if (buf == NULL) {
                buf = ngx_palloc(r->pool, NGX_HTTP_WAF_FILE_CHUNK);
                if (buf == NULL) {
                    return NGX_HTTP_INTERNAL_SERVER_ERROR;
                }
            }

            for (off = b->file_pos; off < b->file_last; off += n) {
                len = ngx_min((off_t) NGX_HTTP_WAF_FILE_CHUNK, b->file_last - off);
                n = ngx_read_file(b->file, buf, len, off);
                if (n <= 0) {
                    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                                  "waf: cannot read the request body file");
                    return NGX_HTTP_INTERNAL_SERVER_ERROR;
                }

                st = waf_tx_request_body(ctx->tx, buf, n, &iv);
                rc = ngx_http_waf_decide(r, ctx, st, &iv, "request body");
                if (rc != NGX_DECLINED) {
                    return rc;
                }
            }
        }
    }

    st = waf_tx_request_end(ctx->tx, &iv);
    return ngx_http_waf_decide(r, ctx, st, &iv, "request end");
}


static void
ngx_http_waf_body_handler(ngx_http_request_t *r)
{
    ngx_http_waf_ctx_t  *ctx;

    ctx = ngx_http_waf_get_ctx(r);
    if (ctx == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    ctx->access_rc = ngx_http_waf_inspect_body(r, ctx);

    /* run the phases again: the access handler returns access_rc */
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}


static ngx_int_t
ngx_http_waf_start(ngx_http_request_t *r, ngx_http_waf_loc_conf_t *lcf,
    ngx_http_waf_ctx_t **pctx)
{
    u_char               client[NGX_SOCKADDR_STRLEN + 1];
    u_char               server[NGX_SOCKADDR_STRLEN + 1];
    u_char              *id;
    size_t               len;
    uint64_t             now;
    waf_status           st;
    ngx_str_t            s;
    ngx_connection_t    *c;
    ngx_http_variable_value_t  *v;
    ngx_pool_cleanup_t  *cln;
    ngx_http_waf_ctx_t  *ctx;

    c = r->connection;

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_waf_ctx_t));
    if (ctx == NULL) {
        return NGX_ERROR;
    }
    ctx->r = r;
    ctx->access_rc = NGX_AGAIN;
    ctx->last_out = &ctx->out;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    len = ngx_min(c->addr_text.len, NGX_SOCKADDR_STRLEN);
    ngx_memcpy(client, c->addr_text.data, len);
    client[len] = '\0';

    s.data = server;
    s.len = NGX_SOCKADDR_STRLEN;
    if (ngx_connection_local_sockaddr(c, &s, 0) != NGX_OK) {
        s.len = 0;
    }
    server[s.len] = '\0';

    now = (uint64_t) r->start_sec * 1000 + r->start_msec;

    /* the transaction id is $request_id (32 hex digits) */
    id = NULL;
    v = ngx_http_get_indexed_variable(r, ngx_http_waf_request_id_index);
    if (v != NULL && !v->not_found && v->len > 0 && v->len <= NGX_HTTP_WAF_MAX_ID_LEN) {
        id = ngx_pnalloc(r->pool, v->len + 1);
        if (id == NULL) {
            return NGX_ERROR;
        }
        ngx_memcpy(id, v->data, v->len);
        id[v->len] = '\0';
    }

    st = waf_tx_new(lcf->engine, (const char *) client,
                    ngx_inet_get_port(c->sockaddr), (const char *) server,
                    ngx_inet_get_port(c->local_sockaddr), now, (const char *) id, ctx,
                    &ctx->tx);
    if (st != WAF_STATUS_OK) {
        ngx_log_error(NGX_LOG_ERR, c->log, 0, "waf: cannot start a transaction: %s",
                      waf_last_error() ? waf_last_error() : "?");
        return NGX_ERROR;
    }

    cln->handler = ngx_http_waf_cleanup;
    cln->data = ctx;
    ngx_http_set_ctx(r, ctx, ngx_http_waf_module);

    *pctx = ctx;
    return NGX_OK;
}


#if (NGX_HTTP_WAF_TEST_HOOKS)
/* Test builds only (see config): does the request ask for an engine failure? */
static ngx_int_t
ngx_http_waf_test_fault(ngx_http_request_t *r)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    for (part = &r->headers_in.headers.part; part; part = part->next) {
        h = part->elts;
        for (i = 0; i < part->nelts; i++) {
            if (h[i].key.len == sizeof("X-Waf-Test-Fault") - 1
                && ngx_strncasecmp(h[i].key.data, (u_char *) "X-Waf-Test-Fault",
                                   h[i].key.len) == 0)
            {
                return 1;
            }
        }
    }

    return 0;
}
#endif


/* Sends a whole answer from the library (a gate's page, JSON or redirect, or a gate
 * endpoint's answer) and frees it. Returns what ngx_http_output_filter returned. */
static ngx_int_t
ngx_http_waf_send_answer(ngx_http_request_t *r, ngx_http_waf_ctx_t *ctx, waf_answer *a)
{
    size_t            i, n, len;
    u_char           *p;
    ngx_int_t         rc;
    ngx_buf_t        *b;
    ngx_chain_t       out;
    waf_header        h;
    ngx_table_elt_t  *t;
    const uint8_t    *body;

    ctx->intervened = 1;
    if (a == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    r->headers_out.status = waf_answer_status(a);
    ngx_http_clear_location(r);

    n = waf_answer_header_count(a);
    for (i = 0; i < n; i++) {
        if (waf_answer_header(a, i, &h) != WAF_STATUS_OK) {
            continue;
        }
        p = ngx_pnalloc(r->pool, h.name_len + h.value_len);
        if (p == NULL) {
            waf_answer_free(a);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ngx_memcpy(p, h.name, h.name_len);
        ngx_memcpy(p + h.name_len, h.value, h.value_len);

        if (h.name_len == sizeof("content-type") - 1
            && ngx_strncasecmp(p, (u_char *) "content-type", h.name_len) == 0)
        {
            r->headers_out.content_type.data = p + h.name_len;
            r->headers_out.content_type.len = h.value_len;
            r->headers_out.content_type_len = h.value_len;
            continue;
        }

        t = ngx_list_push(&r->headers_out.headers);
        if (t == NULL) {
            waf_answer_free(a);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        t->hash = 1;
        t->key.data = p;
        t->key.len = h.name_len;
        t->value.data = p + h.name_len;
        t->value.len = h.value_len;
#if (nginx_version >= 1023000)
        t->next = NULL;
#endif
        if (h.name_len == sizeof("location") - 1
            && ngx_strncasecmp(p, (u_char *) "location", h.name_len) == 0)
        {
            r->headers_out.location = t;
        }
    }

    body = waf_answer_body(a, &len);
    r->headers_out.content_length_n = len;

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        waf_answer_free(a);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (len > 0) {
        p = ngx_pnalloc(r->pool, len);
        if (p == NULL) {
            waf_answer_free(a);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ngx_memcpy(p, body, len);
        b->pos = p;
        b->last = p + len;
        b->memory = 1;
    }
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    waf_answer_free(a);

    if (len == 0) {
        r->header_only = 1;
    }

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;
    return ngx_http_output_filter(r, &out);
}


/* A gate endpoint (/.waf/...): the library answers it with its form body. */
static ngx_int_t
ngx_http_waf_gate(ngx_http_request_t *r, ngx_http_waf_ctx_t *ctx)
{
    size_t        n, len;
    u_char       *body, *p;
    waf_status    st;
    waf_header   *hs;
    ngx_str_t     version;
    ngx_chain_t  *cl;
    waf_answer   *a;
    const char   *to, *subject, *text, *err;

    ngx_http_waf_loc_conf_t  *lcf;

    len = 0;
    if (r->request_body != NULL) {
        for (cl = r->request_body->bufs; cl; cl = cl->next) {
            if (cl->buf->in_file && !ngx_buf_in_memory(cl->buf)) {
                return NGX_HTTP_REQUEST_ENTITY_TOO_LARGE;
            }
            len += cl->buf->last - cl->buf->pos;
        }
    }
    if (len > WAF_GATE_FORM_LEN) {
        return NGX_HTTP_REQUEST_ENTITY_TOO_LARGE;
    }
    body = ngx_pnalloc(r->pool, len + 1);
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    p = body;
    if (r->request_body != NULL) {
        for (cl = r->request_body->bufs; cl; cl = cl->next) {
            p = ngx_cpymem(p, cl->buf->pos, cl->buf->last - cl->buf->pos);
        }
    }

    hs = ngx_http_waf_collect_headers(r, &r->headers_in.headers, 0, &n);
    if (hs == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    version = r->http_protocol;
    if (version.len == 0) {
        ngx_str_set(&version, "HTTP/0.9");
    }

    a = NULL;
    st = waf_tx_gate_request(ctx->tx, r->method_name.data, r->method_name.len,
                             r->unparsed_uri.data, r->unparsed_uri.len,
                             version.data, version.len, hs, n, body, len, &a);
    if (st != WAF_STATUS_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (a == NULL) {
        return NGX_HTTP_NOT_FOUND;
    }

    /* A sign-in code: queued for the library's mail thread (never waited for here). */
    if (waf_answer_mail(a, &to, &subject, &text)) {
        lcf = ngx_http_get_module_loc_conf(r, ngx_http_waf_module);
        st = waf_engine_send_mail(lcf->engine, a);
        if (st != WAF_STATUS_OK) {
            err = waf_last_error();
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "waf: %s",
                          err ? err : "the sign-in mail was not queued");
            a = waf_answer_mail_failed(a);
            if (a == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
        }
    }
    return ngx_http_waf_send_answer(r, ctx, a);
}


static void
ngx_http_waf_gate_body_handler(ngx_http_request_t *r)
{
    ngx_http_waf_ctx_t  *ctx;

    ctx = ngx_http_waf_get_ctx(r);
    if (ctx == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    ngx_http_finalize_request(r, ngx_http_waf_gate(r, ctx));
}


/* Phases 1 and 2. */
static ngx_int_t
ngx_http_waf_access_handler(ngx_http_request_t *r)
{
    size_t                    n;
    ngx_int_t                 rc;
    waf_status                st;
    waf_header               *hs;
    ngx_str_t                 version;
    bool                      wants;
    waf_intervention          iv;
    ngx_http_waf_ctx_t       *ctx;
    ngx_http_waf_loc_conf_t  *lcf;

    if (r != r->main) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_waf_get_ctx(r);

    if (ctx != NULL) {
        /* back after reading the body, or after an internal redirect */
        if (ctx->access_rc == NGX_AGAIN) {
            return NGX_DONE;
        }
        if (ctx->intervened && ctx->access_rc != NGX_DECLINED) {
            rc = ctx->access_rc;
            /* answer once; an error_page redirect then runs unhindered */
            ctx->access_rc = NGX_DECLINED;
            return rc;
        }
        return NGX_DECLINED;
    }

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_waf_module);
    if (!lcf->enable || lcf->engine == NULL) {
        return NGX_DECLINED;
    }

    if (ngx_http_waf_start(r, lcf, &ctx) != NGX_OK) {
        if (lcf->fail_open) {
            ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                          "waf: no transaction, passing the request (waf_fail_open on)");
            return NGX_DECLINED;
        }
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    hs = ngx_http_waf_collect_headers(r, &r->headers_in.headers, 0, &n);
    if (hs == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    version = r->http_protocol;
    if (version.len == 0) {
        ngx_str_set(&version, "HTTP/0.9");
    }

#if (NGX_HTTP_WAF_TEST_HOOKS)
    if (ngx_http_waf_test_fault(r)) {
        /* a NULL method with a length: the engine answers WAF_STATUS_INVALID_ARGUMENT */
        st = waf_tx_request_headers(ctx->tx, NULL, 1, r->unparsed_uri.data,
                                    r->unparsed_uri.len, version.data, version.len,
                                    hs, n, &iv);
    } else
#endif
    st = waf_tx_request_headers(ctx->tx, r->method_name.data, r->method_name.len,
                                r->unparsed_uri.data, r->unparsed_uri.len,
                                version.data, version.len, hs, n, &iv);
    if (st == WAF_STATUS_INTERVENE && waf_tx_gate_intervened(ctx->tx)) {
        /* a gate: its page (or JSON, or redirect), the same as every host sends */
        waf_answer  *a = NULL;
        ngx_str_t    accept = ngx_null_string;

        ctx->access_rc = NGX_DECLINED;
#if (NGX_HTTP_HEADERS)
        if (r->headers_in.accept != NULL) {
            accept = r->headers_in.accept->value;
        }
#endif
        if (waf_tx_answer(ctx->tx, iv.status, accept.data, accept.len, &a)
            != WAF_STATUS_OK)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ngx_http_finalize_request(r, ngx_http_waf_send_answer(r, ctx, a));
        return NGX_DONE;
    }
    rc = ngx_http_waf_decide(r, ctx, st, &iv, "request headers");
    if (rc != NGX_DECLINED) {
        ctx->access_rc = NGX_DECLINED;
        return rc;
    }

    if (waf_engine_is_gate_path(lcf->engine, r->uri.data, r->uri.len)) {
        ctx->access_rc = NGX_DECLINED;
        ctx->intervened = 1;
        rc = ngx_http_read_client_request_body(r, ngx_http_waf_gate_body_handler);
        if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
            return rc;
        }
        ngx_http_finalize_request(r, NGX_DONE);
        return NGX_DONE;
    }

    wants = false;
    st = waf_tx_wants_request_body(ctx->tx, &wants);
    if (st != WAF_STATUS_OK) {
        wants = true;  /* fail closed: inspect */
    }

    if (!wants) {
        st = waf_tx_request_end(ctx->tx, &iv);
        rc = ngx_http_waf_decide(r, ctx, st, &iv, "request end");
        ctx->access_rc = NGX_DECLINED;
        return rc;
    }

    /* Read the whole body, then come back through ngx_http_waf_body_handler. */
    ctx->body_requested = 1;
    rc = ngx_http_read_client_request_body(r, ngx_http_waf_body_handler);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        ctx->access_rc = NGX_DECLINED;
        return rc;
    }

    ngx_http_finalize_request(r, NGX_DONE);
    return NGX_DONE;
}


/* Phases 3 and 4 */

static ngx_int_t
ngx_http_waf_response_headers(ngx_http_request_t *r, ngx_http_waf_ctx_t *ctx)
{
    u_char            clen[NGX_OFF_T_LEN];
    size_t            n;
    waf_status        st;
    waf_header       *hs;
    waf_intervention  iv;

    hs = ngx_http_waf_collect_headers(r, &r->headers_out.headers, 2, &n);
    if (hs == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* nginx keeps these two outside the list */
    if (r->headers_out.content_type.len) {
        hs[n].name = (const uint8_t *) "Content-Type";
        hs[n].name_len = sizeof("Content-Type") - 1;
        hs[n].value = r->headers_out.content_type.data;
        hs[n].value_len = r->headers_out.content_type.len;
        n++;
    }

    if (r->headers_out.content_length == NULL
        && r->headers_out.content_length_n >= 0)
    {
        hs[n].name = (const uint8_t *) "Content-Length";
        hs[n].name_len = sizeof("Content-Length") - 1;
        hs[n].value = clen;
        hs[n].value_len = ngx_sprintf(clen, "%O", r->headers_out.content_length_n)
                          - clen;
        n++;
    }

    st = waf_tx_response_headers(ctx->tx, (uint16_t) r->headers_out.status,
                                 (const uint8_t *) "HTTP/1.1", 8, hs, n, &iv);
    return ngx_http_waf_decide(r, ctx, st, &iv, "response headers");
}


static ngx_int_t
ngx_http_waf_header_filter(ngx_http_request_t *r)
{
    bool                 wants;
    ngx_int_t            rc;
    waf_status           st;
    waf_intervention     iv;
    ngx_http_waf_ctx_t  *ctx;

    if (r != r->main) {
        return ngx_http_next_header_filter(r);
    }

    ctx = ngx_http_waf_get_ctx(r);

    if (ctx == NULL || ctx->tx == NULL || ctx->intervened
        || ctx->resp_headers_done || ctx->finished)
    {
        return ngx_http_next_header_filter(r);
    }

    ctx->resp_headers_done = 1;

    /* the gates' cookies (admission, renewals) on a response that went through */
    {
        size_t            i, n, len;
        const uint8_t    *c;
        ngx_table_elt_t  *t;

        n = waf_tx_set_cookie_count(ctx->tx);
        for (i = 0; i < n; i++) {
            c = waf_tx_set_cookie(ctx->tx, i, &len);
            if (c == NULL) {
                continue;
            }
            t = ngx_list_push(&r->headers_out.headers);
            if (t == NULL) {
                return NGX_ERROR;
            }
            t->value.data = ngx_pnalloc(r->pool, len);
            if (t->value.data == NULL) {
                return NGX_ERROR;
            }
            ngx_memcpy(t->value.data, c, len);
            t->value.len = len;
            t->hash = 1;
            ngx_str_set(&t->key, "Set-Cookie");
#if (nginx_version >= 1023000)
            t->next = NULL;
#endif
        }
    }

    rc = ngx_http_waf_response_headers(r, ctx);
    if (rc == NGX_HTTP_CLOSE) {
        return NGX_ERROR;
    }
    if (rc != NGX_DECLINED) {
        return ngx_http_filter_finalize_request(r, &ngx_http_waf_module, rc);
    }

    wants = false;
    st = waf_tx_wants_response_body(ctx->tx, &wants);
    if (st != WAF_STATUS_OK) {
        wants = false;
    }

    if (!wants || r->header_only) {
        st = waf_tx_response_end(ctx->tx, &iv);
        rc = ngx_http_waf_decide(r, ctx, st, &iv, "response end");
        if (rc == NGX_HTTP_CLOSE) {
            return NGX_ERROR;
        }
        if (rc != NGX_DECLINED) {
            return ngx_http_filter_finalize_request(r, &ngx_http_waf_module, rc);
        }
        return ngx_http_next_header_filter(r);
    }

    /* Hold the header back until the body has been inspected. */
    ctx->resp_buffering = 1;
    r->filter_need_in_memory = 1;
    r->allow_ranges = 0;

    return NGX_OK;
}


/* Ends buffering: phase 4 on what was buffered, then header + buffered body, or the block. */
static ngx_int_t
ngx_http_waf_release(ngx_http_request_t *r, ngx_http_waf_ctx_t *ctx,
    ngx_chain_t *rest)
{
    ngx_int_t         rc;
    waf_status        st;
    waf_intervention  iv;

    ctx->resp_buffering = 0;

    st = waf_tx_response_end(ctx->tx, &iv);
    rc = ngx_http_waf_decide(r, ctx, st, &iv, "response end");
    if (rc == NGX_HTTP_CLOSE) {
        return NGX_ERROR;
    }
    if (rc != NGX_DECLINED) {
        return ngx_http_filter_finalize_request(r, &ngx_http_waf_module, rc);
    }

    rc = ngx_http_next_header_filter(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    *ctx->last_out = rest;
    rc = ngx_http_next_body_filter(r, ctx->out);
    ctx->out = NULL;
    ctx->last_out = &ctx->out;

    return rc;
}


static ngx_int_t
ngx_http_waf_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    size_t               size;
    ngx_buf_t           *b, *copy;
    ngx_int_t            rc;
    waf_status           st;
    ngx_chain_t         *cl, *link;
    waf_intervention     iv;
    ngx_http_waf_ctx_t  *ctx;
    ngx_http_waf_loc_conf_t  *lcf;

    if (r != r->main) {
        return ngx_http_next_body_filter(r, in);
    }

    ctx = ngx_http_waf_get_ctx(r);
    if (ctx == NULL || !ctx->resp_buffering) {
        return ngx_http_next_body_filter(r, in);
    }

    if (in == NULL) {
        return NGX_OK;  /* a flush while the header is held back: nothing to send yet */
    }

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_waf_module);

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;
        size = ngx_buf_in_memory(b) ? (size_t) (b->last - b->pos) : 0;

        if (ctx->buffered + size > lcf->response_buffer_size) {
            /* too big to hold back: decide on what we have, stream the rest */
            return ngx_http_waf_release(r, ctx, cl);
        }

        if (size) {
            st = waf_tx_response_body(ctx->tx, b->pos, size, &iv);
            rc = ngx_http_waf_decide(r, ctx, st, &iv, "response body");
            if (rc == NGX_HTTP_CLOSE) {
                ctx->resp_buffering = 0;
                return NGX_ERROR;
            }
            if (rc != NGX_DECLINED) {
                ctx->resp_buffering = 0;
                return ngx_http_filter_finalize_request(r, &ngx_http_waf_module, rc);
            }

            copy = ngx_create_temp_buf(r->pool, size);
            if (copy == NULL) {
                return NGX_ERROR;
            }
            copy->last = ngx_cpymem(copy->pos, b->pos, size);
            ctx->buffered += size;

            link = ngx_alloc_chain_link(r->pool);
            if (link == NULL) {
                return NGX_ERROR;
            }
            link->buf = copy;
            link->next = NULL;
            *ctx->last_out = link;
            ctx->last_out = &link->next;
        }

        /* consumed: the producer may reuse the buffer */
        b->pos = b->last;
        if (b->in_file) {
            b->file_pos = b->file_last;
        }

        if (b->last_buf) {
            copy = ngx_calloc_buf(r->pool);
            link = ngx_alloc_chain_link(r->pool);
            if (copy == NULL || link == NULL) {
                return NGX_ERROR;
            }
            copy->last_buf = 1;
            link->buf = copy;
            link->next = NULL;
            return ngx_http_waf_release(r, ctx, link);
        }
    }

    return NGX_OK;
}


/* Phase 5 */

/*
 * The report callback, at the log phase. One "warn" line per transaction in which a rule
 * logged or an intervention happened: status, deciding rule, scores and the ids of the
 * rules that logged (short enough for NGX_MAX_ERROR_STR). The full audit record (JSON)
 * follows at "info"; nginx cuts error log lines at NGX_MAX_ERROR_STR (2048) bytes.
 */
static void
ngx_http_waf_report(void *user_data, const waf_report *report)
{
    u_char              *p, *last, *line;
    u_char               ids[1024];
    size_t               i;
    ssize_t              n;
    ngx_log_t           *log;
    ngx_open_file_t     *file;
    ngx_http_waf_ctx_t  *ctx = user_data;
    ngx_http_waf_loc_conf_t  *lcf;

    if (ctx == NULL || ctx->r == NULL) {
        return;
    }

    if (report->logged_rules == 0 && report->intervention_status == 0) {
        return;
    }

    log = ctx->r->connection->log;

    p = ids;
    last = ids + sizeof(ids);
    for (i = 0; i < report->logged_rules && (size_t) (last - p) > NGX_INT64_LEN + 4; i++) {
        p = ngx_slprintf(p, last, "%s%uL", i ? "," : "", report->logged_rule_ids[i]);
    }
    if (i < report->logged_rules) {
        p = ngx_slprintf(p, last, ",...");
    }

    ngx_log_error(NGX_LOG_WARN, log, 0,
                  "waf: unique_id=%s status=%d rule=%uL inbound_score=%L "
                  "outbound_score=%L rules=%*s",
                  report->unique_id, (int) report->intervention_status,
                  report->intervention_rule_id, report->inbound_anomaly_score,
                  report->outbound_anomaly_score, p - ids, ids);

    lcf = ngx_http_get_module_loc_conf(ctx->r, ngx_http_waf_module);
    file = lcf->audit_log;

    if (file == NULL) {
        ngx_log_error(NGX_LOG_INFO, log, 0, "waf audit: %*s",
                      report->audit_json_len, report->audit_json);
        return;
    }

    if (file->fd == NGX_INVALID_FILE) {
        return;
    }

    /* one write per record: O_APPEND keeps the lines of the workers whole */
    line = ngx_pnalloc(ctx->r->pool, report->audit_json_len + 1);
    if (line == NULL) {
        return;
    }
    ngx_memcpy(line, report->audit_json, report->audit_json_len);
    line[report->audit_json_len] = '\n';

    n = ngx_write_fd(file->fd, line, report->audit_json_len + 1);
    if (n != (ssize_t) report->audit_json_len + 1) {
        ngx_log_error(NGX_LOG_ALERT, log, ngx_errno,
                      "waf: cannot write the audit record to \"%V\"", &file->name);
    }
}


static ngx_int_t
ngx_http_waf_log_handler(ngx_http_request_t *r)
{
    ngx_http_waf_ctx_t  *ctx;

    if (r != r->main) {
        return NGX_OK;
    }

    ctx = ngx_http_waf_get_ctx(r);
    if (ctx == NULL || ctx->tx == NULL || ctx->finished) {
        return NGX_OK;
    }

    ctx->finished = 1;
    (void) waf_tx_finish(ctx->tx);

    return NGX_OK;
}


static ngx_int_t
ngx_http_waf_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;
    ngx_http_waf_main_conf_t   *mcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    /* every engine is built (merge runs before postconfiguration) */
    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_waf_module);
    if (mcf->fleet_set && !mcf->fleet_used) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "waf_fleet in %V:%ui has no effect: no waf_policy_file has a "
                      "rate limit, bans, scoring, a waiting room or sign-in, so there is "
                      "nothing "
                      "to share", &mcf->fleet_file, mcf->fleet_line);
        return NGX_ERROR;
    }

    ngx_http_waf_request_id_index = ngx_http_get_variable_index(cf,
                                                                &ngx_http_waf_request_id);
    if (ngx_http_waf_request_id_index == NGX_ERROR) {
        return NGX_ERROR;
    }

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_ACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_waf_access_handler;

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_waf_log_handler;

    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_waf_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_waf_body_filter;

    return NGX_OK;
}
