#ifndef ADPLAYERD_CFFMPEG_SHIM_H
#define ADPLAYERD_CFFMPEG_SHIM_H
/* FFmpeg's decoders and scaler, which libmpv already pulls in: used to decode ad images. */
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libswscale/swscale.h>
#include <libavutil/imgutils.h>
#include <libavutil/error.h>
/* Audio to float samples for the loudness meter (libswresample, with libmpv's FFmpeg). */
#include <libswresample/swresample.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
/* SHA-256: the creative cache names a file by its content. */
#include <libavutil/sha.h>
/* zlib (libavformat's own dependency): a PNG's image data is checked to be all there. */
#include <zlib.h>

/* AVERROR(EAGAIN) and AVERROR_EOF are macros Swift cannot import. */
static inline int cffmpeg_error_again(void) { return AVERROR(EAGAIN); }
static inline int cffmpeg_error_eof(void) { return AVERROR_EOF; }
#endif
