/* attention_kv_end.h — undoes the names attention_kv.h set up for one element type, so that
 * attention_modes.h can build the template again for the next. */
#undef KEY_VECS
#undef KV_VROW
#undef KV_KCOL
#undef KV_F
#undef KV_LOAD
#undef kv_t
#undef KV_LN
#undef KV_BF16
#undef vh /* BF16 elements only */
