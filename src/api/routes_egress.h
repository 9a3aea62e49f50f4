/* Routes of the network and secrets plane. */
#ifndef HUSK_API_ROUTES_EGRESS_H
#define HUSK_API_ROUTES_EGRESS_H

#include "api/internal.h"

enum MHD_Result h_secret_put(struct req *r);
enum MHD_Result h_secret_list(struct req *r);
enum MHD_Result h_secret_delete(struct req *r);
enum MHD_Result h_admin_secret_put(struct req *r);
enum MHD_Result h_admin_secret_list(struct req *r);
enum MHD_Result h_admin_secret_delete(struct req *r);
enum MHD_Result h_box_network(struct req *r);

#endif
