/* LD_PRELOAD shim for wrk: every TLS connection does a full handshake.
 *
 * wrk reuses one SSL object per connection slot and only SSL_clear()s it between
 * connections, which keeps the last session, so with `Connection: close` OpenSSL resumes
 * the session (abbreviated handshake: no certificate, no signature) on every connection
 * after the first. Gateways differ in whether they let a client resume (nginx: tickets on;
 * waf-proxy: tickets and a session cache, not configurable), so to measure the same thing
 * everywhere this shim drops the session before each handshake starts.
 *
 * It also counts full and resumed handshakes and prints, when wrk exits:
 *   tls-handshakes: full N resumed M <protocol> <cipher> <group>
 * (resumed should be 0). Built by benches/load/run.sh:
 *   cc -O2 -shared -fPIC -o no_resume.so no_resume.c -ldl
 *
 * OpenSSL 1.1.1 / 3.x ABI; declared here so no libssl-dev headers are needed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

typedef struct ssl_st SSL;
typedef struct ssl_session_st SSL_SESSION;
typedef struct ssl_cipher_st SSL_CIPHER;
int SSL_in_before(const SSL *s);
int SSL_set_session(SSL *s, SSL_SESSION *session);
int SSL_session_reused(const SSL *s);
const char *SSL_get_version(const SSL *s);
const SSL_CIPHER *SSL_get_current_cipher(const SSL *s);
const char *SSL_CIPHER_get_name(const SSL_CIPHER *c);
long SSL_ctrl(SSL *s, int cmd, long larg, void *parg);
#define SSL_CTRL_GET_NEGOTIATED_GROUP 134
/* OpenSSL 3 only; looked up at run time. */
typedef const char *(*group_to_name_fn)(SSL *s, int id);

static unsigned long full, resumed;
static char params[160];

int SSL_connect(SSL *s) {
  static int (*real)(SSL *);
  if (!real) real = (int (*)(SSL *))dlsym(RTLD_NEXT, "SSL_connect");
  /* wrk calls SSL_connect again after WANT_READ/WANT_WRITE: only a handshake that has
   * not started yet loses its session. */
  if (SSL_in_before(s)) SSL_set_session(s, NULL);
  int r = real(s);
  if (r == 1) {
    if (SSL_session_reused(s))
      __atomic_add_fetch(&resumed, 1, __ATOMIC_RELAXED);
    else
      __atomic_add_fetch(&full, 1, __ATOMIC_RELAXED);
    if (!params[0]) {
      const char *group = "?";
      group_to_name_fn to_name = (group_to_name_fn)dlsym(RTLD_DEFAULT, "SSL_group_to_name");
      if (to_name) {
        const char *g = to_name(s, (int)SSL_ctrl(s, SSL_CTRL_GET_NEGOTIATED_GROUP, 0, NULL));
        if (g) group = g;
      }
      snprintf(params, sizeof params, "%s %s %s", SSL_get_version(s),
               SSL_CIPHER_get_name(SSL_get_current_cipher(s)), group);
    }
  }
  return r;
}

__attribute__((destructor)) static void report(void) {
  fprintf(stderr, "tls-handshakes: full %lu resumed %lu %s\n", full, resumed, params);
}
