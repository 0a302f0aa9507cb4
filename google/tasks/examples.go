package tasks

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"tasks_lists":  {"create a new task list", "show my task lists", "make a new list for shopping", "delete a to-do list"},
	"tasks_list":   {"what's on my to-do list", "show the tasks I haven't finished", "what is due today on my list"},
	"tasks_create": {"add renew the car insurance to my tasks", "note a to-do to pay the bill", "add a task to my list", "put call the doctor on my to-do list", "new to-do item for tomorrow"},
	"tasks_update": {"mark the task complete", "change a task's due date", "edit the task title"},
	"tasks_move":   {"move a task to the top", "make a task a subtask of another", "change the order of my tasks"},
	"tasks_delete": {"delete a task", "remove an item from my to-do list"},
}
