/* conv2d.cl with a 15 x 15 filter. */
#define FR 7
#include "conv2d.cl"
