// A fixture for tools/check_markers.sh: a chapter's lines inside a function
// body, and a #if 0 inside one. The checker must name lines 7, 9, 10 and 12.
#include <stdio.h>

int f(int x) {
    const char * s = "{ not a brace }";   // nor this {
    //@+ 06 more
    x += 1;
    //@- 06 more
#if 0 //@old 05..05 was
    x += 2;
#endif //@old was
    return x + (s[0] == '{');
}
