/*
 * malloc_trim(3) for the daemon (see index.ts in this folder): glibc keeps
 * freed memory inside its heap and only gives back what lies at the top;
 * malloc_trim(0) also releases the free pages in between. One function, no
 * state, built with a plain C compiler against Node-API (ABI-stable).
 */
#include <malloc.h>
#include <node_api.h>

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  napi_get_boolean(env, malloc_trim(0) != 0, &out);
  return out;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "mallocTrim", NAPI_AUTO_LENGTH, Trim, NULL, &fn);
  napi_set_named_property(env, exports, "mallocTrim", fn);
  return exports;
}
