/* finetune_cmd.h — kronosd finetune (finetune_cmd.c). */
#ifndef KD_FINETUNE_CMD_H
#define KD_FINETUNE_CMD_H

/* argv[0] is "finetune"; the exit status. */
int kd_finetune_cmd(int argc, char **argv);

#endif
