// A fixture for tools/check_markers.sh: markers only at file scope, around
// whole functions and inside an initializer; nothing to report.
#include <stdio.h>

static const int table[] = {
    1,
    //@+ 06 more
    2,
    //@- 06 more
};

#if 0 //@old 05..05 f
int f(int x) {
    return x + table[0];
}
#endif //@old f

//@+ 06 f
int f(int x) {
    const char * s = "} {";   /* } */
    return x + table[1] + (s[0] == '}');
}
//@- 06 f
