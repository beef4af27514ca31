/* attention_kv.h — the element type of the keys and values that one build of attention's
 * template reads (attention_modes.h sets KV_BF16 before including it, and undoes it all after
 * the build): float32, or BF16 widened exactly on load (a 16-bit shift), so that the
 * arithmetic of attention_lanes.h and attention_tile_lanes.h is the same in both. Also what
 * both of them use: KV_LN(name), a name of this build (the level's suffix after the type's,
 * _f or _h), and the vectors a group of 16 keys takes. */

#if KV_BF16
#define KV_LN(name) KR_LN(name##_h)
#define kv_t        uint16_t
#define vh          KV_LN(vh)
typedef uint16_t vh __attribute__((vector_size(2 * KR_W), aligned(2)));
#define KV_LOAD(p) ((vf)(__builtin_convertvector(*(const vh *)(p), vi) << 16))
#define KV_F(x)    kr_bf16_widen(x)
#define KV_KCOL    kr_kv_kcol_h
#define KV_VROW    kr_kv_v_h
#else
#define KV_LN(name) KR_LN(name##_f)
#define kv_t        float
#define KV_LOAD(p)  KR_LOAD(p)
#define KV_F(x)     (x)
#define KV_KCOL     kr_kv_kcol
#define KV_VROW     kr_kv_v
#endif

#define KEY_VECS (KEY_LANES / KR_W) /* vectors a group of 16 keys */
