/* UPMEM SDK <macro_utils.h> (nearmem): token pasting and stringification. */
#ifndef DPUSYSCORE_MACRO_UTILS_H
#define DPUSYSCORE_MACRO_UTILS_H

/* Same definition as glibc's <sys/cdefs.h>, so both may be included. */
#ifndef __CONCAT
#define __CONCAT(x,y)	x ## y
#endif
#define __NM_STR2(x) #x
#ifndef __STR
#define __STR(x) __NM_STR2(x)
#endif

#endif
