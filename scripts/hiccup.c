// Busy loop reading CLOCK_MONOTONIC for 10 s; every gap > 1 us between two reads is time
// the loop did not run (an interrupt and whatever it raised). Prints count and quantiles.
// Used for host.dom0_wake_us (docs/realism.md): gcc -O2 -o /tmp/hiccup scripts/hiccup.c && taskset -c 1 /tmp/hiccup
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static long long ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000LL+t.tv_nsec;}
static int cmp(const void*a,const void*b){long long x=*(long long*)a,y=*(long long*)b;return x<y?-1:x>y;}
int main(void){static long long g[2000000];int n=0;long long s=ns(),p=s,end=s+10000000000LL;
 for(;;){long long t=ns();if(t-p>1000&&n<2000000)g[n++]=t-p;p=t;if(t>end)break;}
 qsort(g,n,sizeof g[0],cmp);long long sum=0;for(int i=0;i<n;i++)sum+=g[i];
 printf("gaps>1us in 10 s: %d (%.1f/s); median %lld ns, p90 %lld ns, mean %lld ns\n",n,n/10.0,n?g[n/2]:0,n?g[n*9/10]:0,n?sum/n:0);}
