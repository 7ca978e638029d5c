/* conv2d.cl with a 5 x 5 filter. */
#define FR 2
#include "conv2d.cl"
