/* attention_modes.h — attention's template (attention_lanes.h) built twice for each level:
 * over float32 keys and values (names suffixed _f) and over BF16 ones (_h, a model loaded
 * with kv bf16). lanes.h includes this once per level; attention.c dispatches on the level
 * and on the view's element type. Included only by attention.c. */
#define KV_BF16     0
#define KV_LN(name) KR_LN(name##_f)
#include "attention_lanes.h"
#undef KV_LN
#undef KV_BF16

#define KV_BF16     1
#define KV_LN(name) KR_LN(name##_h)
#include "attention_lanes.h"
#undef KV_LN
#undef KV_BF16
