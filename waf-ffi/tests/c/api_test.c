/* Exercises the whole C API of waf-ffi. Built and run by tests/capi.rs (plain and under
 * valgrind). Exits 0 when every check passes; prints the failed check otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "waf.h"

static int failures = 0;

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

#define S(lit) (const uint8_t *)(lit), (sizeof(lit) - 1)

static const char RULES[] =
    "SecRuleEngine On\n"
    "SecRequestBodyAccess On\n"
    "SecResponseBodyAccess On\n"
    "SecResponseBodyMimeType text/plain text/html\n"
    "SecRule ARGS \"@contains attack\" \"id:101,phase:1,deny,status:403,msg:'attack in args'\"\n"
    "SecRule ARGS:go \"@streq away\" \"id:102,phase:1,redirect:http://example.com/blocked\"\n"
    "SecRule ARGS:cut \"@streq now\" \"id:103,phase:1,drop\"\n"
    "SecRule REQUEST_BODY \"@contains evil\" \"id:201,phase:2,deny,status:406,msg:'evil body'\"\n"
    "SecRule RESPONSE_HEADERS:X-Leak \"@streq yes\" \"id:301,phase:3,deny,status:502\"\n"
    "SecRule RESPONSE_BODY \"@contains secret-token\" \"id:401,phase:4,deny,status:451,msg:'leak'\"\n"
    "SecRule REQUEST_HEADERS:User-Agent \"@contains scanner\" \"id:501,phase:1,pass,log,msg:'scanner seen'\"\n";

struct seen {
    int reports;
    int logged;
    uint16_t last_status;
    uint64_t last_rule;
    uint64_t first_logged;
    char json[4096];
};

static void on_report(void *user_data, const waf_report *r) {
    struct seen *s = user_data;
    s->reports++;
    s->logged += (int)r->logged_rules;
    s->last_status = r->intervention_status;
    s->last_rule = r->intervention_rule_id;
    CHECK(r->unique_id != NULL);
    CHECK(strlen(r->audit_json) == r->audit_json_len);
    CHECK((r->logged_rules == 0) == (r->logged_rule_ids == NULL));
    for (size_t i = 0; i < r->logged_rules; i++) CHECK(r->logged_rule_ids[i] > 0);
    if (r->logged_rules > 0) s->first_logged = r->logged_rule_ids[0];
    snprintf(s->json, sizeof s->json, "%s", r->audit_json);
}

static waf_engine *build(const char *rules, size_t len) {
    waf_builder *b = waf_builder_new();
    CHECK(b != NULL);
    CHECK(waf_builder_rules(b, "inline", rules, len) == WAF_STATUS_OK);
    CHECK(waf_builder_report_callback(b, on_report) == WAF_STATUS_OK);
    CHECK(waf_builder_fail_open(b, false) == WAF_STATUS_OK);
    waf_engine *e = NULL;
    CHECK(waf_builder_build(b, &e) == WAF_STATUS_OK);
    return e;
}

static waf_tx *start(waf_engine *e, struct seen *s) {
    waf_tx *tx = NULL;
    CHECK(waf_tx_new(e, "192.0.2.1", 50000, "127.0.0.1", 80, 1700000000000ULL, NULL, s, &tx) ==
          WAF_STATUS_OK);
    CHECK(tx != NULL);
    return tx;
}

static waf_status get(waf_tx *tx, const char *uri, waf_intervention *iv) {
    waf_header h[] = {
        {S("Host"), S("example.com")},
        {S("User-Agent"), S("scanner/1.0")},
    };
    return waf_tx_request_headers(tx, S("GET"), (const uint8_t *)uri, strlen(uri), S("HTTP/1.1"),
                                  h, 2, iv);
}

static void test_errors(void) {
    waf_builder_free(NULL);
    waf_engine_free(NULL);
    waf_tx_free(NULL);
    CHECK(waf_builder_rules(NULL, "x", "", 0) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(waf_last_error(), "builder") != NULL);
    CHECK(waf_builder_build(NULL, NULL) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_tx_request_end(NULL, NULL) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_tx_finish(NULL) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_tx_unique_id(NULL) == NULL);
    CHECK(waf_engine_rule_count(NULL, NULL) == WAF_STATUS_INVALID_ARGUMENT);

    /* A syntax error: RULES_ERROR, the location in the message, the builder consumed. */
    waf_builder *b = waf_builder_new();
    const char bad[] = "SecRuleEngine On\nSecRule ARGS \"@rx (\" \"id:1,phase:1,deny\"\n";
    CHECK(waf_builder_rules(b, "bad.conf", bad, sizeof bad - 1) == WAF_STATUS_OK);
    waf_engine *e = (waf_engine *)&e;
    CHECK(waf_builder_build(b, &e) == WAF_STATUS_RULES_ERROR);
    CHECK(e == NULL);
    CHECK(strstr(waf_last_error(), "bad.conf:2") != NULL);

    /* NULL text with a length, non-UTF-8 text, a missing file. */
    b = waf_builder_new();
    CHECK(waf_builder_rules(b, "x", NULL, 5) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_builder_rules(b, "x", "\xff\xfe", 2) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_builder_rules(b, NULL, "", 0) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_builder_rules_file(b, "/nonexistent/waf-rules.conf") == WAF_STATUS_OK);
    CHECK(waf_builder_build(b, &e) == WAF_STATUS_RULES_ERROR);
    CHECK(strstr(waf_last_error(), "waf-rules.conf") != NULL);

    /* A builder that is never built is freed. */
    b = waf_builder_new();
    CHECK(waf_builder_rules_glob(b, "/nonexistent/*.conf") == WAF_STATUS_OK);
    waf_builder_free(b);
}

static void test_phases(waf_engine *e) {
    struct seen s = {0};
    waf_intervention iv;
    size_t n = 0;
    CHECK(waf_engine_rule_count(e, &n) == WAF_STATUS_OK);
    CHECK(n == 7);

    /* Benign: every phase continues; response body inspected. */
    waf_tx *tx = start(e, &s);
    CHECK(waf_tx_unique_id(tx) != NULL && strlen(waf_tx_unique_id(tx)) > 0);
    CHECK(get(tx, "/index?q=hello", &iv) == WAF_STATUS_OK);
    CHECK(iv.action == WAF_ACTION_NONE && iv.status == 0);
    bool wants = false;
    CHECK(waf_tx_wants_request_body(tx, &wants) == WAF_STATUS_OK && wants);
    CHECK(waf_tx_wants_request_body(tx, NULL) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_tx_request_body(tx, S("a=1&b=2"), &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_request_body(tx, NULL, 0, &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_request_body(tx, NULL, 3, &iv) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_tx_request_end(tx, &iv) == WAF_STATUS_OK);
    waf_header rh[] = {{S("Content-Type"), S("text/html")}};
    CHECK(waf_tx_response_headers(tx, 200, S("HTTP/1.1"), rh, 1, &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_response_headers(tx, 200, S("HTTP/1.1"), NULL, 1, &iv) ==
          WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_tx_wants_response_body(tx, &wants) == WAF_STATUS_OK && wants);
    CHECK(waf_tx_response_body(tx, S("<p>fine</p>"), NULL) == WAF_STATUS_OK);
    CHECK(waf_tx_response_end(tx, &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_finish(tx) == WAF_STATUS_OK);
    CHECK(s.reports == 1 && s.last_status == 0 && s.logged == 1);
    CHECK(strstr(s.json, "\"id\":501") != NULL);
    CHECK(s.first_logged == 501);
    /* Finished: later calls are misuse, not crashes. */
    CHECK(waf_tx_finish(tx) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_tx_request_end(tx, &iv) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(waf_last_error(), "finished") != NULL);
    waf_tx_free(tx);

    /* Phase 1 deny with a message. */
    tx = start(e, &s);
    CHECK(get(tx, "/?x=attack", &iv) == WAF_STATUS_INTERVENE);
    CHECK(iv.status == 403 && iv.action == WAF_ACTION_DENY && iv.rule_id == 101);
    CHECK(iv.log != NULL && strcmp(iv.log, "attack in args") == 0 && iv.url == NULL);
    CHECK(waf_tx_finish(tx) == WAF_STATUS_OK);
    CHECK(s.reports == 2 && s.last_status == 403 && s.last_rule == 101);
    waf_tx_free(tx);

    /* Redirect and drop. */
    tx = start(e, &s);
    CHECK(get(tx, "/?go=away", &iv) == WAF_STATUS_INTERVENE);
    CHECK(iv.action == WAF_ACTION_REDIRECT && iv.rule_id == 102);
    CHECK(iv.url != NULL && strcmp(iv.url, "http://example.com/blocked") == 0);
    waf_tx_free(tx); /* freed unfinished: no report */
    CHECK(s.reports == 2);
    tx = start(e, &s);
    CHECK(get(tx, "/?cut=now", &iv) == WAF_STATUS_INTERVENE);
    CHECK(iv.action == WAF_ACTION_DROP && iv.rule_id == 103);
    waf_tx_free(tx);

    /* Phase 2: body split in chunks. */
    tx = start(e, &s);
    waf_header ph[] = {{S("Host"), S("example.com")},
                       {S("Content-Type"), S("application/x-www-form-urlencoded")},
                       {S("Content-Length"), S("6")}};
    CHECK(waf_tx_request_headers(tx, S("POST"), S("/post"), S("HTTP/1.1"), ph, 3, &iv) ==
          WAF_STATUS_OK);
    CHECK(waf_tx_request_body(tx, S("x=ev"), &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_request_body(tx, S("il"), &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_request_end(tx, &iv) == WAF_STATUS_INTERVENE);
    CHECK(iv.status == 406 && iv.rule_id == 201);
    waf_tx_free(tx);

    /* Phase 3 and phase 4. */
    tx = start(e, &s);
    CHECK(get(tx, "/", &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_request_end(tx, &iv) == WAF_STATUS_OK);
    waf_header leak[] = {{S("X-Leak"), S("yes")}};
    CHECK(waf_tx_response_headers(tx, 200, S("HTTP/1.1"), leak, 1, &iv) == WAF_STATUS_INTERVENE);
    CHECK(iv.status == 502 && iv.rule_id == 301);
    waf_tx_free(tx);
    tx = start(e, &s);
    CHECK(get(tx, "/", &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_request_end(tx, &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_response_headers(tx, 200, S("HTTP/1.1"), rh, 1, &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_response_body(tx, S("the secret-"), &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_response_body(tx, S("token is 42"), &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_response_end(tx, &iv) == WAF_STATUS_INTERVENE);
    CHECK(iv.status == 451 && iv.rule_id == 401 && strcmp(iv.log, "leak") == 0);
    CHECK(waf_tx_finish(tx) == WAF_STATUS_OK);
    CHECK(s.last_status == 451);
    waf_tx_free(tx);

    /* A caller-chosen unique id; a non-IP client address is accepted. */
    CHECK(waf_tx_new(e, "unix:/run/x.sock", 0, "127.0.0.1", 80, 0, "req-42", NULL, &tx) ==
          WAF_STATUS_OK);
    CHECK(strcmp(waf_tx_unique_id(tx), "req-42") == 0);
    waf_tx_free(tx);
    CHECK(waf_tx_new(e, NULL, 0, "127.0.0.1", 80, 0, NULL, NULL, &tx) ==
          WAF_STATUS_INVALID_ARGUMENT);
    CHECK(tx == NULL);
}

/* The engine is shared by threads; each thread runs its own transactions. */
static void *worker(void *arg) {
    waf_engine *e = arg;
    struct seen s = {0};
    for (int i = 0; i < 50; i++) {
        waf_tx *tx = start(e, &s);
        waf_intervention iv;
        CHECK(get(tx, (i % 2) ? "/?x=attack" : "/?x=fine", &iv) ==
              ((i % 2) ? WAF_STATUS_INTERVENE : WAF_STATUS_OK));
        CHECK(waf_tx_finish(tx) == WAF_STATUS_OK);
        waf_tx_free(tx);
    }
    CHECK(s.reports == 50);
    return NULL;
}

static void test_threads(waf_engine *e) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, worker, e) == 0);
    for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);
}

/* A transaction may outlive its engine. */
static void test_outlive(void) {
    struct seen s = {0};
    waf_engine *e = build(RULES, sizeof RULES - 1);
    waf_tx *tx = start(e, &s);
    waf_engine_free(e);
    waf_intervention iv;
    CHECK(get(tx, "/?x=attack", &iv) == WAF_STATUS_INTERVENE && iv.rule_id == 101);
    CHECK(waf_tx_finish(tx) == WAF_STATUS_OK && s.reports == 1);
    waf_tx_free(tx);
}

/* ---- the gates (waf_answer) ---- */

static waf_status get_with(waf_tx *tx, const char *uri, const char *cookie, waf_intervention *iv) {
    waf_header h[] = {
        {S("Host"), S("example.com")},
        {S("User-Agent"), S("c-test")},
        {S("Accept"), S("text/html")},
        {S("Cookie"), (const uint8_t *)cookie, strlen(cookie)},
    };
    return waf_tx_request_headers(tx, S("GET"), (const uint8_t *)uri, strlen(uri), S("HTTP/1.1"),
                                  h, cookie[0] ? 4 : 3, iv);
}

/* The value of header `name` in `a` (NUL-terminated copy in `buf`), or NULL. */
static const char *answer_header(const waf_answer *a, const char *name, char *buf, size_t cap) {
    for (size_t i = 0; i < waf_answer_header_count(a); i++) {
        waf_header h;
        CHECK(waf_answer_header(a, i, &h) == WAF_STATUS_OK);
        if (h.name_len == strlen(name) && memcmp(h.name, name, h.name_len) == 0 &&
            h.value_len < cap) {
            memcpy(buf, h.value, h.value_len);
            buf[h.value_len] = 0;
            return buf;
        }
    }
    return NULL;
}

static const char GATES[] =
    "[gates]\n"
    "keys = [\"a C test key of at least thirty-two bytes\"]\n"
    "[[gates.waiting_room]]\n"
    "name = \"room\"\n"
    "match = 'http.request.uri.path == \"/shop\"'\n"
    "capacity = 1\n"
    "[[rules]]\n"
    "name = \"p\"\n"
    "expression = 'http.request.uri.path == \"/protected\"'\n"
    "action = \"challenge\"\n"
    "challenge = \"cookie\"\n";

static void test_gates(void) {
    char path[] = "/tmp/waf-gates-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(GATES, f);
    fclose(f);

    /* A host that does not say it serves the gates is refused such a policy. */
    waf_builder *b = waf_builder_new();
    CHECK(waf_builder_policy_file(b, path) == WAF_STATUS_RULES_ERROR);
    CHECK(strstr(waf_last_error(), "[gates]") != NULL);
    waf_builder_free(b);

    b = waf_builder_new();
    CHECK(waf_builder_serve_gates(b, true) == WAF_STATUS_OK);
    CHECK(waf_builder_policy_file(b, path) == WAF_STATUS_OK);
    waf_engine *e = NULL;
    CHECK(waf_builder_build(b, &e) == WAF_STATUS_OK);
    remove(path);
    if (e == NULL) return;
    CHECK(waf_engine_is_gate_path(e, S("/.waf/cookie")));
    CHECK(!waf_engine_is_gate_path(e, S("/protected")));
    CHECK(!waf_engine_is_gate_path(NULL, S("/.waf/cookie")));

    /* A cookie challenge: 302 to the cookie check, with the pass cookie. */
    waf_intervention iv;
    waf_tx *tx = NULL;
    CHECK(waf_tx_new(e, "192.0.2.1", 1, "127.0.0.1", 80, 1700000000000ULL, NULL, NULL, &tx) ==
          WAF_STATUS_OK);
    CHECK(get_with(tx, "/protected", "", &iv) == WAF_STATUS_INTERVENE);
    waf_answer *a = NULL;
    CHECK(waf_tx_answer(tx, iv.status, S("text/html"), &a) == WAF_STATUS_OK);
    CHECK(waf_answer_status(a) == 302);
    char loc[512], setc[512], cookie[600];
    CHECK(answer_header(a, "location", loc, sizeof loc) != NULL);
    CHECK(strncmp(loc, "/.waf/cookie?", 13) == 0);
    CHECK(answer_header(a, "set-cookie", setc, sizeof setc) != NULL);
    CHECK(strncmp(setc, "__waf_pass=", 11) == 0);
    *strchr(setc, ';') = 0;
    snprintf(cookie, sizeof cookie, "%s", setc);
    const char *to, *subject, *body;
    CHECK(!waf_answer_mail(a, &to, &subject, &body));
    CHECK(waf_answer_mail_failed(a) == NULL); /* consumes a */
    waf_tx_free(tx);

    /* The cookie check is a gate endpoint: answered by the library, back to the page. */
    CHECK(waf_tx_new(e, "192.0.2.1", 1, "127.0.0.1", 80, 1700000000000ULL, NULL, NULL, &tx) ==
          WAF_STATUS_OK);
    CHECK(get_with(tx, loc, cookie, &iv) == WAF_STATUS_OK);
    waf_header h[] = {{S("Host"), S("example.com")},
                      {S("User-Agent"), S("c-test")},
                      {S("Cookie"), (const uint8_t *)cookie, strlen(cookie)}};
    CHECK(waf_tx_gate_request(tx, S("GET"), (const uint8_t *)loc, strlen(loc), S("HTTP/1.1"), h, 3,
                              NULL, 0, &a) == WAF_STATUS_OK);
    CHECK(a != NULL);
    CHECK(waf_answer_status(a) == 303);
    CHECK(answer_header(a, "location", setc, sizeof setc) && strcmp(setc, "/protected") == 0);
    size_t n = 0;
    CHECK(waf_answer_body(a, &n) != NULL || n == 0);
    waf_answer_free(a);
    waf_tx_free(tx);

    /* The pass is accepted. */
    CHECK(waf_tx_new(e, "192.0.2.1", 1, "127.0.0.1", 80, 1700000000000ULL, NULL, NULL, &tx) ==
          WAF_STATUS_OK);
    CHECK(get_with(tx, "/protected", cookie, &iv) == WAF_STATUS_OK);
    waf_tx_free(tx);

    /* Waiting room of one: the first is in (with its admission cookie), the second waits. */
    CHECK(waf_tx_new(e, "192.0.2.1", 1, "127.0.0.1", 80, 1700000000000ULL, NULL, NULL, &tx) ==
          WAF_STATUS_OK);
    CHECK(get_with(tx, "/shop", "", &iv) == WAF_STATUS_OK);
    CHECK(waf_tx_set_cookie_count(tx) == 1);
    const uint8_t *c = waf_tx_set_cookie(tx, 0, &n);
    CHECK(c != NULL && n > 12 && memcmp(c, "__waf_admit=", 12) == 0);
    CHECK(waf_tx_set_cookie(tx, 1, &n) == NULL);
    waf_tx_free(tx);
    CHECK(waf_tx_new(e, "192.0.2.2", 1, "127.0.0.1", 80, 1700000000000ULL, NULL, NULL, &tx) ==
          WAF_STATUS_OK);
    CHECK(get_with(tx, "/shop", "", &iv) == WAF_STATUS_INTERVENE);
    CHECK(waf_tx_answer(tx, iv.status, NULL, 0, &a) == WAF_STATUS_OK);
    CHECK(waf_answer_status(a) == 503);
    const uint8_t *page = waf_answer_body(a, &n);
    CHECK(page != NULL && n > 0);
    CHECK(answer_header(a, "retry-after", setc, sizeof setc) != NULL);
    waf_answer_free(a);
    waf_answer_free(NULL);
    waf_tx_free(tx);
    waf_engine_free(e);
}

/* ---- the sign-in mail (waf_builder_smtp, waf_engine_send_mail) ---- */

static const char SIGN_IN[] =
    "[gates]\n"
    "keys = [\"a C test key of at least thirty-two bytes\"]\n"
    "[gates.sign_in]\n"
    "allowed = [\"alice@example.com\"]\n";

/* Copies the value of hidden input `name` of `page` (`n` bytes) into `buf`. */
static const char *page_input(const uint8_t *page, size_t n, const char *name, char *buf,
                              size_t cap) {
    char key[64];
    snprintf(key, sizeof key, "name=\"%s\" value=\"", name);
    char *text = malloc(n + 1);
    if (text == NULL) return NULL;
    memcpy(text, page, n);
    text[n] = 0;
    const char *at = strstr(text, key);
    const char *res = NULL;
    if (at != NULL) {
        at += strlen(key);
        const char *end = strchr(at, '"');
        if (end != NULL && (size_t)(end - at) < cap) {
            memcpy(buf, at, end - at);
            buf[end - at] = 0;
            res = buf;
        }
    }
    free(text);
    return res;
}

/* A gate request of a new transaction on `e`: GET (body NULL) or a form POST. */
static waf_answer *gate(waf_engine *e, const char *uri, const char *cookie, const char *body) {
    waf_tx *tx = NULL;
    waf_intervention iv;
    waf_answer *a = NULL;
    CHECK(waf_tx_new(e, "192.0.2.1", 1, "127.0.0.1", 80, 1700000000000ULL, NULL, NULL, &tx) ==
          WAF_STATUS_OK);
    CHECK(get_with(tx, uri, cookie, &iv) == WAF_STATUS_OK);
    waf_header h[] = {{S("Host"), S("example.com")},
                      {S("User-Agent"), S("c-test")},
                      {S("Accept"), S("text/html")},
                      {S("Cookie"), (const uint8_t *)cookie, strlen(cookie)}};
    const char *method = body ? "POST" : "GET";
    CHECK(waf_tx_gate_request(tx, (const uint8_t *)method, strlen(method), (const uint8_t *)uri,
                              strlen(uri),
                              S("HTTP/1.1"), h, cookie[0] ? 4 : 3, (const uint8_t *)body,
                              body ? strlen(body) : 0, &a) == WAF_STATUS_OK);
    waf_tx_free(tx);
    return a;
}

static void test_fleet(void) {
    /* Settings are checked by waf_builder_fleet; nothing connects until a request. */
    const char *one[] = {"redis://127.0.0.1:1"};
    const char *two[] = {"redis://127.0.0.1:1", "redis://127.0.0.1:2"};
    const char *bad_url[] = {"redis://:notaport"};
    waf_builder *b = waf_builder_new();
    waf_fleet f = {one, 1, false, "c-test", NULL, 20, 0, WAF_FLEET_CUT_OFF_LOCAL, 0};
    waf_fleet bad = f;
    bad.server_count = 0;
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(waf_last_error(), "no redis server") != NULL);
    bad = f;
    bad.servers = two;
    bad.server_count = 2;
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(waf_last_error(), "cluster") != NULL);
    bad.cluster = true;
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_OK);
    bad = f;
    bad.servers = bad_url;
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(waf_last_error(), "not a redis URL") != NULL);
    bad = f;
    bad.interval_ms = 5;
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    bad = f;
    bad.cut_off = 7;
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    bad.cut_off = WAF_FLEET_CUT_OFF_SHARE;
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    bad.nodes = 3;
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_OK);
    bad = f;
    bad.namespace_name = "";
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    bad.namespace_name = NULL;
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    bad = f;
    bad.prefix = "{x}";
    CHECK(waf_builder_fleet(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_builder_fleet(b, NULL) == WAF_STATUS_INVALID_ARGUMENT);
    /* Built with a fleet: no thread, no connection yet (the engine may be forked). */
    CHECK(waf_builder_fleet(b, &f) == WAF_STATUS_OK);
    CHECK(waf_builder_rules(b, "rules", "SecRuleEngine On", 16) == WAF_STATUS_OK);
    waf_engine *e = NULL;
    CHECK(waf_builder_build(b, &e) == WAF_STATUS_OK);
    CHECK(e != NULL);
    /* no policy with state: the fleet has nothing to share, which the host reports */
    CHECK(!waf_engine_uses_fleet(e));
    CHECK(!waf_engine_uses_fleet(NULL));
    waf_engine_free(e);
}

static void test_smtp(void) {
    /* Settings are checked by waf_builder_smtp. */
    waf_builder *b = waf_builder_new();
    waf_smtp s = {"127.0.0.1", 1, WAF_SMTP_PLAIN, "WAF <waf@example.com>", NULL, NULL, 2000};
    waf_smtp bad = s;
    bad.host = NULL;
    CHECK(waf_builder_smtp(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    bad = s;
    bad.from = "not an address";
    CHECK(waf_builder_smtp(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(waf_last_error(), "not an address") != NULL);
    bad = s;
    bad.username = "u";
    CHECK(waf_builder_smtp(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    bad = s;
    bad.security = 7;
    CHECK(waf_builder_smtp(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    bad = s;
    bad.port = 0;
    CHECK(waf_builder_smtp(b, &bad) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(waf_builder_smtp(b, NULL) == WAF_STATUS_INVALID_ARGUMENT);
    /* A relay on a closed port: the mail is queued, the thread logs the failure. */
    CHECK(waf_builder_smtp(b, &s) == WAF_STATUS_OK);
    CHECK(waf_builder_serve_gates(b, true) == WAF_STATUS_OK);
    CHECK(waf_builder_rules(b, "policy-less", "SecRuleEngine On", 16) == WAF_STATUS_OK);
    char path[] = "/tmp/waf-signin-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(SIGN_IN, f);
    fclose(f);
    CHECK(waf_builder_policy_file(b, path) == WAF_STATUS_OK);
    remove(path);
    waf_engine *e = NULL;
    CHECK(waf_builder_build(b, &e) == WAF_STATUS_OK);
    if (e == NULL) return;
    CHECK(waf_engine_has_sign_in(e));

    waf_answer *a = gate(e, "/.waf/sign-in?return_to=/", "", NULL);
    CHECK(a != NULL && waf_answer_status(a) == 200);
    if (a == NULL) return;
    char setc[512], token[256], ret[256], body[1024];
    size_t n = 0;
    const uint8_t *page = waf_answer_body(a, &n);
    CHECK(answer_header(a, "set-cookie", setc, sizeof setc) != NULL);
    *strchr(setc, ';') = 0;
    CHECK(page_input(page, n, "form_token", token, sizeof token) != NULL);
    CHECK(page_input(page, n, "return_to", ret, sizeof ret) != NULL);
    const char *to, *subject, *text;
    CHECK(!waf_answer_mail(a, &to, &subject, &text));
    CHECK(waf_engine_send_mail(e, a) == WAF_STATUS_OK); /* no mail: nothing to do */
    waf_answer_free(a);

    snprintf(body, sizeof body, "email=alice%%40example.com&form_token=%s&return_to=%%2F", token);
    a = gate(e, "/.waf/sign-in", setc, body);
    CHECK(a != NULL && waf_answer_status(a) == 200);
    if (a == NULL) return;
    CHECK(waf_answer_mail(a, &to, &subject, &text));
    CHECK(strcmp(to, "alice@example.com") == 0 && strstr(text, "code") != NULL);
    CHECK(waf_engine_send_mail(e, a) == WAF_STATUS_OK);
    CHECK(waf_engine_send_mail(NULL, a) == WAF_STATUS_INVALID_ARGUMENT);

    /* An engine without a relay cannot send it: the host sends the "could not send" page. */
    waf_builder *b2 = waf_builder_new();
    CHECK(waf_builder_rules(b2, "none", "SecRuleEngine On", 16) == WAF_STATUS_OK);
    waf_engine *plain = NULL;
    CHECK(waf_builder_build(b2, &plain) == WAF_STATUS_OK);
    CHECK(waf_engine_send_mail(plain, a) == WAF_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(waf_last_error(), "waf_builder_smtp") != NULL);
    waf_engine_free(plain);
    waf_answer *failed = waf_answer_mail_failed(a);
    CHECK(failed != NULL && waf_answer_status(failed) >= 500);
    waf_answer_free(failed);
    /* Freeing the engine waits for its mail thread (which failed to connect). */
    waf_engine_free(e);
}

int main(void) {
    CHECK(strlen(waf_version()) > 0);
    CHECK(waf_last_error() == NULL);
    test_errors();
    waf_engine *e = build(RULES, sizeof RULES - 1);
    CHECK(e != NULL);
    if (e != NULL) {
        test_phases(e);
        test_threads(e);
        waf_engine_free(e);
    }
    test_outlive();
    test_gates();
    test_smtp();
    test_fleet();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
