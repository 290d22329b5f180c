// index.glsl - which element (or row) an invocation (or workgroup) works on.
// Vulkan promises only 65535 workgroups per dimension of a dispatch
// (maxComputeWorkGroupCount), so a dispatch of more is laid out by the host
// as a grid of x by y groups (ops_vulkan.c: spread_groups), numbered row by
// row; the few groups past the end find nothing to do, as the last group of
// a one-row dispatch already does. ggml-vulkan spreads large dispatches
// over y and z the same way.
//
// #include'd after the shader's layout(local_size_x = ...) line.

// The workgroup's number, counting x fastest.
uint group_index() {
    return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}

// The invocation's number, counting within a group fastest: what
// gl_GlobalInvocationID.x is when every group is on the x axis.
uint invocation_index() {
    return group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
}
