package calendar

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"calendar_list_calendars": {"list my calendars", "which shared calendars can I see"},
	"calendar_list_events":    {"what have I got on Thursday", "my plans for the weekend", "what is on my agenda this week", "my appointments on Friday", "do I have anything planned tonight", "show my schedule for tomorrow"},
	"calendar_get_event":      {"details of the team meeting", "who is coming to the event and where is it", "what time does the appointment start"},
	"calendar_create_event":   {"book a meeting with Luis on Tuesday at 3", "add a dentist appointment on the 4th at 9", "put a recurring event every week on my calendar", "plan dinner with friends on Saturday"},
	"calendar_update_event":   {"add a guest to the meeting", "push the event back an hour", "reschedule the call to 4pm", "move the meeting to next Monday", "add Marta as a guest to the event", "change the event's place"},
	"calendar_delete_event":   {"cancel my meeting tomorrow", "delete the event from my calendar", "remove the appointment"},
	"calendar_freebusy":       {"do I have a gap in my day", "find time when I'm not busy", "when do I have free time on Wednesday", "find an open slot for a meeting", "am I available tomorrow at 2", "is everyone free on Monday"},
}
