/* The custom plugin's state: the folder holding its sandboxes. Types only. */
#ifndef SBX_CUSTOM_STATE_H
#define SBX_CUSTOM_STATE_H

#define CUSTOM_ALIAS "custom"

typedef struct custom_state {
	const char *root_key; /* the `root` key as configured (borrowed), NULL when absent */
	char root[1024];
} custom_state;

#endif
