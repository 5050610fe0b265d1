#ifndef ADPLAYERD_CEBUR128_SHIM_H
#define ADPLAYERD_CEBUR128_SHIM_H
/* libebur128: integrated loudness and true peak (ITU-R BS.1770-4, EBU R128) of a creative or
   an episode, measured off the player's loop (SPEC R28). */
#include <ebur128.h>
#endif
