#include "clcrt.h"

const char *clcrt_status_name(clcrt_status s) {
  switch (s) {
#define X(name, msg) \
  case CLCRT_##name: return "CLCRT_" #name;
    CLCRT_STATUS_MAP(X)
#undef X
    default: return "CLCRT_E_UNKNOWN";
  }
}

const char *clcrt_status_str(clcrt_status s) {
  switch (s) {
#define X(name, msg) \
  case CLCRT_##name: return msg;
    CLCRT_STATUS_MAP(X)
#undef X
    default: return "unknown status code";
  }
}
