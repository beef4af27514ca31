/* attention_modes.h — attention's template built twice for each level: over float32 keys and
 * values (names suffixed _f) and over BF16 ones (_h, a model loaded with kv bf16). lanes.h
 * includes this once per level; for each element type it sets attention_kv.h up, builds the
 * row path (attention_lanes.h) and the tile path (attention_tile_lanes.h) on it, and undoes
 * attention_kv.h's names (attention_kv_end.h). attention.c dispatches on the level and on the
 * view's element type. Included only through lanes.h by attention.c. */
#define KV_BF16 0
#include "attention_kv.h"
#include "attention_lanes.h"
#include "attention_tile_lanes.h"
#include "attention_kv_end.h"

#define KV_BF16 1
#include "attention_kv.h"
#include "attention_lanes.h"
#include "attention_tile_lanes.h"
#include "attention_kv_end.h"
