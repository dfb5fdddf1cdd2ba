/* cli/main.c -- placeholder until the command lands. */
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "radixkv: not built yet\n");
    return 1;
}
